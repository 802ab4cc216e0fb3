"""Where a contended hand-off's Redis time goes: distlock's functions (the library, loaded
as lock-core loads it) on a private redis-server, with Redis' own accounting (SLOWLOG per
call, INFO commandstats, INFO cpu). See BENCHMARKS.md,
"Where the contended path's time goes". Python 3, no packages; loopback only; bounded.

    python3 examples/bench/profile/profile.py [--quick]
"""
import sys
from resp import *
from cycle import run, keys, acquire_args
from uncontended import uncontended
from micro import micro, cut, tiny

KIND = {'x': 'exclusive', 's': 'semaphore (1 permit)', 'rw': 'read-write (writers)'}

def per_function(port, waiters, cycles):
    lib = library()
    print('\n| kind | waiters | acquire (busy) µs, median | release (hand-off) µs, median | '
          'FCALL µs/call, mean | inner calls/acq | inner µs/acq | Redis µs/acq (used_cpu) |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|')
    for mode in ('x', 's', 'rw'):
        u = uncontended(lib, mode, port, n=cycles)
        print('| %s | uncontended | %d | %d | %.1f | %.0f | | %.1f |' % (
            KIND[mode], u['med_acq'], u['med_rel'], u['us_cycle'] / 2, u['inner_per_cycle'], u['cpu_us_cycle']))
        for w in waiters:
            res, _ = run(lib, mode, w, cycles, port)
            print('| %s | %d | %d | %d | %.1f | %.0f | %.1f | %.1f |' % (
                KIND[mode], w, res['med_acq'], res['med_rel'], res['us_call'], res['inner_per_acq'],
                res['inner_us_acq'], res['cpu_us_acq']))

# Where to cut the exclusive `acquire` (a line of it): the part named ends there.
ACQUIRE_CUTS = [
    ('its keys and arguments as locals', "local lease_ms, owner, meta, waiter_ttl_ms, publish = args[1]"),
    ('+ the uncontended check (EXISTS key queue)', "local present = redis.call('exists', key, queue)"),
    ('+ TIME, the member, HMGET owner and record', "    record = mine[2]"),
    ('+ queueing (one ZADD LT, one PEXPIRE)', "    enqueue(queue, me, t, ttl, waiter_ttl_ms)\n  end"),
]

def acquire_branches(port):
    """The exclusive acquire's busy path, cut after each part (the same state every call:
    the lock held, 64 waiters queued, the caller among them)."""
    c = Conn(port)
    lib = library()
    ks = keys(lib, 'x')
    def setup():
        c.cmd('FLUSHALL'); lib.load(c)
        for i in range(65):
            c.cmd('FCALL', lib.fn('acquire'), len(ks), *ks, *acquire_args('x', i, 60000))
    args = lambda j: [len(ks)] + ks + acquire_args('x', 64, 60000)
    variants = [('FCALL of `return 1`, same keys and args', tiny('return 1'), 'profile_micro')]
    for label, line in ACQUIRE_CUTS:
        variants.append((label, cut(lib.source, 'acquire', line), lib.fn('acquire')))
    variants.append(('whole busy path', lib.source, lib.fn('acquire')))
    print('\n| exclusive acquire, busy path, up to | µs per call (median of 3 × 5,000) | inner calls |')
    print('|---|---:|---:|')
    for name, src, fn in variants:
        meds = []
        for _ in range(3):
            med, mean, inner = micro(c, src, fn, args, n=5000, setup=setup)
            meds.append(med)
        print('| %s | %d | %.0f |' % (name, sorted(meds)[1], inner))

def lua_costs(port):
    """What one operation costs inside a function: 100 of it in a loop, per op."""
    c = Conn(port)
    c.cmd('FLUSHALL')
    for i in range(64):
        c.cmd('ZADD', 'q', i, 'm%03d|own|svc\x1fhost' % i); c.cmd('ZADD', 'd', i + 100000, 'm%03d|own|svc\x1fhost' % i)
    c.cmd('HSET', 'h', 'own', 1, 'distlock:holder', '1234567890123456\x1fown\x1fsvc\x1fhost\x1f1234\x1freq')
    c.cmd('PEXPIRE', 'h', 100000000)
    subs = [drain(port, 'ch') for _ in range(2)]
    body = [
        ('redis.call PTTL', "redis.call('pttl', KEYS[1])"),
        ('redis.call EXISTS', "redis.call('exists', KEYS[1])"),
        ('redis.call HGET', "redis.call('hget', KEYS[1], 'own')"),
        ('redis.call HMGET (2 fields)', "redis.call('hmget', KEYS[1], 'own', 'distlock:holder')"),
        ('redis.call TIME', "redis.call('time')"),
        ('redis.call PEXPIRE', "redis.call('pexpire', KEYS[1], 100000000)"),
        ('redis.call ZADD NX (member there)', "redis.call('zadd', KEYS[2], 'NX', 5, 'm005|own|svc\\31host')"),
        ('redis.call ZADD (score update)', "redis.call('zadd', KEYS[3], 100005, 'm005|own|svc\\31host')"),
        ('redis.call ZADD LT (a member and its deadline)', "redis.call('zadd', KEYS[2], 'LT', 5, 'm005|own|svc\\31host', 100005, '~m005|own|svc\\31host')"),
        ('redis.call ZRANGE 0 0', "redis.call('zrange', KEYS[2], 0, 0)"),
        ('redis.call ZSCORE', "redis.call('zscore', KEYS[3], 'm005|own|svc\\31host')"),
        ('redis.call PUBLISH (2 subscribers)', "redis.call('publish', 'ch', 'distlock:grant:own:1234567890123456')"),
        ('define a local function', "local function f(a) return a end"),
        ('concatenate 5 strings', "local s = ARGV[1] .. '|' .. ARGV[2] .. '|' .. ARGV[3]"),
        ("string.format('%d')", "local s = string.format('%d', 1234567890123456)"),
        ('split a record with gmatch', "local f = {} for v in string.gmatch(ARGV[3] .. '\\31', '([^\\31]*)\\31') do f[#f + 1] = v end"),
        ('string.match a token', "local n = tonumber(string.match(ARGV[3], '^%d+'))"),
    ]
    args = lambda j: [3, 'h', 'q', 'd', '30000', 'own', '1234567890123456\x1fown\x1fsvc\x1fhost\x1f1234\x1freq']
    print('\n| inside a function | µs per op (100 per call, median call) |')
    print('|---|---:|')
    for name, b in body:
        med, _, _ = micro(c, tiny('for i = 1, 100 do %s end return 1' % b), 'profile_micro', args, n=400)
        print('| %s | %.2f |' % (name, med / 100))
    for s in subs: s.s.close()

if __name__ == '__main__':
    quick = '--quick' in sys.argv
    p, port = start_server()
    try:
        print('load:', open('/proc/loadavg').read().split()[:3], 'cores:', os.cpu_count())
        per_function(port, (4, 64) if quick else (4, 64, 1024), 2000 if quick else 10000)
        if '--branches' in sys.argv or not quick:
            acquire_branches(port)
            lua_costs(port)
    finally:
        p.kill()
