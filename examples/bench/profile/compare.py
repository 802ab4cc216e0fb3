"""The scripts of this tree beside those of another commit (default: HEAD), per kind of hold,
on one private redis-server kept busy (pipe.py): the uncontended cycle on distinct names and
the contended hand-off (W waiters queued on one name; each cycle the holder releases, handing
over to the head, and queues again). Prints commands µs and Redis CPU per acquisition (the least of the rounds), the
calls made inside the scripts, and contended ÷ uncontended. See BENCHMARKS.md.

    python3 examples/bench/profile/compare.py [--against REV] [--waiters W] [--cycles N] [--rounds R]
"""
import argparse, importlib.util, os, subprocess, sys, tempfile
from resp import Conn, start_server, drain
from pipe import replay

FILES = {'x': ('acquire.lua', 'release.lua'), 's': ('sem_acquire.lua', 'sem_release.lua'),
         'rw': ('rw_acquire.lua', 'rw_release.lua'), 's3': ('sem_acquire.lua', 'sem_release.lua')}
KIND = {'x': 'exclusive', 's': 'semaphore (1 permit)', 'rw': 'read-write (writers)',
        's3': 'semaphore (3 permits)'}
# The kind whose scripts and keys a mode takes (a semaphore of 3 is a semaphore).
BASE = {'s3': 's'}
CAPACITY = {'s': 1, 's3': 3}
OWNER = 'a3f1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d:%09d'
INNER_SKIP = ('evalsha', 'config|resetstat', 'info', 'script|load')

def tree(rev, root):
    """The profiler modules and scripts of commit `rev`, as (resp, cycle) modules."""
    if rev is None:
        here = os.path.dirname(os.path.abspath(__file__))
        return load_modules(here, None)
    out = tempfile.mkdtemp(prefix='distlock-profile-')
    os.makedirs(out + '/scripts')
    show = lambda path: subprocess.run(['git', '-C', root, 'show', '%s:%s' % (rev, path)],
                                       check=True, capture_output=True).stdout
    for f in ('resp.py', 'cycle.py'):
        open('%s/%s' % (out, f), 'wb').write(show('examples/bench/profile/' + f))
    names = subprocess.run(['git', '-C', root, 'ls-tree', '--name-only', rev, 'lock-core/src/protocol/scripts/'],
                           check=True, capture_output=True, text=True).stdout.split()
    for path in names:
        if path.endswith('.lua'):
            open('%s/scripts/%s' % (out, os.path.basename(path)), 'wb').write(show(path))
    return load_modules(out, out + '/scripts/')

def load_modules(d, scripts):
    """resp.py and cycle.py of directory `d`, reading the scripts in `scripts` (None: as is)."""
    def load(name):
        spec = importlib.util.spec_from_file_location(name, '%s/%s.py' % (d, name))
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        return m
    saved = sys.modules.get('resp')
    resp = load('resp')
    if scripts:
        resp.SCRIPTS = scripts
    sys.modules['resp'] = resp  # cycle.py imports it by name
    try:
        cycle = load('cycle')
    finally:
        sys.modules['resp'] = saved
    return resp, cycle

def args_of(mode, i, acquire):
    o = OWNER % i + (':write' if mode == 'rw' else '')
    capacity = [CAPACITY[mode]] if mode in CAPACITY else []
    if acquire:
        return [30000, o, 'svc\x1fhost\x1f1234\x1freq-1', 6000, 'publish'] + (['write'] if mode == 'rw' else []) + capacity
    return [o, 30000, 'publish'] + capacity

def inner(st):
    return sum(v[0] for k, v in st.items() if k not in INNER_SKIP)

def uncontended(port, resp, cycle, mode, n):
    c = Conn(port); c.cmd('FLUSHALL')
    base = BASE.get(mode, mode)
    a_src, r_src = (resp.assemble(resp.rd(f), base) for f in FILES[mode])
    a = c.cmd('SCRIPT', 'LOAD', a_src).decode(); r = c.cmd('SCRIPT', 'LOAD', r_src).decode()
    def gen():
        for i in range(n):
            ks = cycle.keys(base, 'n%d' % i)
            yield ['EVALSHA', a, len(ks)] + ks + args_of(mode, 0, True)
            yield ['EVALSHA', r, len(ks)] + ks + args_of(mode, 0, False)
    st, cpu = replay(port, gen())
    assert c.cmd('DBSIZE') == 0, 'the uncontended cycle left keys'
    return st['evalsha'][1] / n, cpu * 1e6 / n, inner(st) / n

def contended(port, resp, cycle, mode, waiters, n):
    c = Conn(port); c.cmd('FLUSHALL')
    base = BASE.get(mode, mode)
    a_src, r_src = (resp.assemble(resp.rd(f), base) for f in FILES[mode])
    a = c.cmd('SCRIPT', 'LOAD', a_src).decode(); r = c.cmd('SCRIPT', 'LOAD', r_src).decode()
    ks = cycle.keys(base)
    A = lambda i: ['EVALSHA', a, len(ks)] + ks + args_of(mode, i, True)
    R = lambda i: ['EVALSHA', r, len(ks)] + ks + args_of(mode, i, False)
    for x in c.pipe([A(i) for i in range(waiters + 1)]):
        if isinstance(x, Exception): raise x
    def gen():
        for i in range(n):
            yield R(i); yield A(i + waiters + 1)
    st, cpu = replay(port, gen())
    holder = OWNER % n + (':write' if mode == 'rw' else '')
    held = c.cmd('ZSCORE', ks[0], holder) if base == 's' else c.cmd('HGET', ks[0], holder)
    assert held is not None, 'the chain of hand-offs broke'
    return st['evalsha'][1] / n, cpu * 1e6 / n, inner(st) / n

def main():
    p = argparse.ArgumentParser()
    p.add_argument('--against', default='HEAD'); p.add_argument('--waiters', type=int, default=64)
    p.add_argument('--cycles', type=int, default=30000); p.add_argument('--rounds', type=int, default=5)
    o = p.parse_args()
    root = subprocess.run(['git', 'rev-parse', '--show-toplevel'], capture_output=True, text=True, check=True).stdout.strip()
    trees = {o.against: tree(o.against, root), 'this tree': tree(None, root)}
    server, port = start_server(pinned=True)
    # Two processes waiting, as two clients would listen: on the channels every grant of a
    # name went to before grants had a channel per client (both hear each grant there),
    # and on each client's own grants channel (the waiters' client hears each grant).
    shared = ('distlock__grant:{lk:L}', 'distlock__semaphore:{lk:L}')
    own = ['distlock__grant:{lk:L}:' + client for client in (OWNER.split(':')[0], 'another-client')]
    subs = [drain(port, ch) for ch in shared for _ in range(2)] + [drain(port, ch) for ch in own]
    try:
        res = {}
        for _ in range(o.rounds):
            for mode in FILES:
                for name, (resp, cycle) in trees.items():
                    res.setdefault((name, mode, 'u'), []).append(uncontended(port, resp, cycle, mode, o.cycles))
                    res.setdefault((name, mode, 'c'), []).append(contended(port, resp, cycle, mode, o.waiters, o.cycles))
        # The least disturbed round: on a shared VM the noise only ever adds time.
        med = lambda xs, j: min(x[j] for x in xs)
        print('load: %s; %d waiters, %d cycles, the least of %d rounds' % (open('/proc/loadavg').read().split()[:3], o.waiters, o.cycles, o.rounds))
        print('\n| kind | scripts | uncontended µs/cycle (cpu) | calls | contended µs/acq (cpu) | calls | contended ÷ uncontended (cpu) |')
        print('|---|---|---:|---:|---:|---:|---:|')
        for mode in FILES:
            for name in trees:
                u, c = res[(name, mode, 'u')], res[(name, mode, 'c')]
                print('| %s | %s | %.1f (%.1f) | %.0f | %.1f (%.1f) | %.0f | %.2f (%.2f) |' % (
                    KIND[mode], name, med(u, 0), med(u, 1), med(u, 2), med(c, 0), med(c, 1), med(c, 2),
                    med(c, 0) / med(u, 0), med(c, 1) / med(u, 1)))
    finally:
        for s in subs: s.s.close()
        server.kill()

if __name__ == '__main__':
    main()
