# Steady contended hand-off: N waiters queued; each cycle: holder releases (hand-off to head),
# then the old holder acquires again (busy: queued at the tail). 2 FCALL per acquisition.
import re
from resp import *
# Each kind as the profiler takes it: lock-core's LockMode variant, its functions' prefix
# in the library, the library's constant naming its release channel.
KIND = {'x': ('Exclusive', '', 'LOCK_CHANNEL'), 'rw': ('Write', 'rw_', 'RW_CHANNEL'),
        's': ('Permit', 'sem_', 'SEMAPHORE_CHANNEL')}
QUEUE, SUFFIX = lock_mode('queue_prefix'), lock_mode('owner_suffix')
META = 'svc\x1fhost\x1f1234\x1freq-1'
OWNER = 'a3f1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d:%09d'
LEASE_MS = 30000
def keys(lib, mode, name='L'):
    """The keys of lock `lk:<name>`, in the order `lib`'s functions take them."""
    k = 'lk:' + name
    ks = [k, QUEUE[KIND[mode][0]] + '{' + k + '}']
    if mode == 's': ks.append(lib.const['HOLDERS_PREFIX'] + '{' + k + '}')
    return ks
def owner(mode, i):
    return OWNER % i + SUFFIX[KIND[mode][0]]
def acquire_args(mode, i, waiter_ttl_ms, capacity=1):
    """ACQUIRE's arguments (the first lines of `acquire`, `rw_acquire`, `sem_acquire`)."""
    side = ['write'] if mode == 'rw' else []
    return [LEASE_MS, owner(mode, i), META, waiter_ttl_ms, 'publish'] + side + ([capacity] if mode == 's' else [])
def release_args(mode, i, capacity=1):
    return [owner(mode, i), LEASE_MS, 'publish'] + ([capacity] if mode == 's' else [])
def fcall(lib, mode, op, ks, args):
    return ['FCALL', lib.fn(KIND[mode][1] + op), len(ks)] + ks + args
def run(lib, mode, waiters, cycles, port, subs=2):
    c = Conn(port)
    c.cmd('FLUSHALL'); lib.load(c)
    ks = keys(lib, mode)
    chan = lib.const[KIND[mode][2]] + '{' + ks[0] + '}'
    subc = [drain(port, chan) for _ in range(subs)]
    A = lambda i: fcall(lib, mode, 'acquire', ks, acquire_args(mode, i, 60000))
    R = lambda i: fcall(lib, mode, 'release', ks, release_args(mode, i))
    # holder 0, waiters 1..N
    for r in c.pipe([A(i) for i in range(waiters + 1)]):
        if isinstance(r, Exception): raise r
    c.cmd('CONFIG', 'SET', 'slowlog-log-slower-than', '0'); c.cmd('CONFIG', 'SET', 'slowlog-max-len', str(2 * cycles + 100)); c.cmd('SLOWLOG', 'RESET')
    c.cmd('CONFIG', 'RESETSTAT')
    cpu0 = cpu(c)
    batch = 200
    cmds = []
    for i in range(cycles):
        cmds.append(R(i)); cmds.append(A(i + waiters + 1))
        if len(cmds) >= batch:
            for r in c.pipe(cmds):
                if isinstance(r, Exception): raise r
            cmds = []
    if cmds:
        for r in c.pipe(cmds):
            if isinstance(r, Exception): raise r
    assert c.cmd('EXISTS', ks[0]) == 1, 'the lock is not held after the cycles'
    st = commandstats(c); cpu1 = cpu(c)
    fc, ins = calls(st, 'fcall'), inner(st)
    res = dict(us_call=fc[1] / max(fc[0], 1), us_acq=fc[1] / cycles, inner_per_acq=ins[0] / cycles,
               inner_us_acq=ins[1] / cycles, cpu_us_acq=(cpu1 - cpu0) * 1e6 / cycles, dbsize=c.cmd('DBSIZE'))
    for s in subc: s.s.close()
    per = slowlog(c, 2 * cycles + 100)
    med = lambda xs: sorted(xs)[len(xs) // 2] if xs else 0
    res['med_acq'] = med(per.get(A(0)[1], [])); res['med_rel'] = med(per.get(R(0)[1], []))
    return res, st
def slowlog(c, n):
    """µs of each FCALL in the slow log, by function; logging set back to slow calls only."""
    per = {}
    for e in c.cmd('SLOWLOG', 'GET', str(n)):
        if e[3][0].lower() == b'fcall':
            per.setdefault(e[3][1].decode(), []).append(e[2])
    c.cmd('CONFIG', 'SET', 'slowlog-log-slower-than', '10000'); c.cmd('SLOWLOG', 'RESET')
    return per
def cpu(c):
    info = c.cmd('INFO', 'cpu').decode()
    s = float(re.search(r'used_cpu_sys:([\d.]+)', info).group(1)); u = float(re.search(r'used_cpu_user:([\d.]+)', info).group(1))
    return s + u
if __name__ == '__main__':
    p, port = start_server()
    try:
        for w in (4, 64, 512):
            r, st = run(library(), 'x', w, 20000, port)
            print('x', w, {k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()})
        for k, v in sorted(st.items()): print('  ', k, v, round(v[1] / v[0], 2))
    finally:
        p.kill()
