"""The protocol of this tree beside that of another commit (default: HEAD), per kind of hold,
on one private redis-server kept busy (pipe.py): the uncontended cycle on distinct names and
the contended hand-off (W waiters queued on one name; each cycle the holder releases, handing
over to the head, and queues again). Prints commands µs and Redis CPU per acquisition (the
least of the rounds), the calls made inside the protocol's calls, contended ÷ uncontended,
and a contended cycle's two calls apart (SLOWLOG medians of a sample). See BENCHMARKS.md.

A commit with the Functions library is measured as this tree is: its library (as its CLI
prints it, `distlock functions source`, built from an archive of the commit; or its one
lock-core/src/protocol/library.lua, before the library was split by kind) loaded under its
own name (FUNCTION LOAD), each operation an FCALL. An older commit, whose
protocol was assembled scripts, is measured with its own profiler (its resp.py assembles
them; its cycle.py names the keys), each operation an EVALSHA.

    python3 examples/bench/profile/compare.py [--against REV] [--waiters W] [--cycles N] [--rounds R]
"""
import argparse, importlib.util, os, subprocess, sys, tempfile
from resp import Conn, Library, library, start_server, drain, calls, inner
from pipe import replay
import cycle

MODES = ('x', 's', 'rw', 's3')
TITLE = {'x': 'exclusive', 's': 'semaphore (1 permit)', 'rw': 'read-write (writers)',
         's3': 'semaphore (3 permits)'}
# The kind whose functions and keys a mode takes (a semaphore of 3 is a semaphore).
BASE = {'s3': 's'}
CAPACITY = {'s3': 3}
# The library's one file, from the Functions library's start until it was split by kind.
ONE_FILE = 'lock-core/src/protocol/library.lua'
CONST = library().const
# Each waiter asks to stay queued as long as lock-core's client asks: the library's minimum.
WAITER_TTL = CONST['WAITER_TTL_MIN']
# Each mode's kind as RENEW names it (a letter the library's prelude defines).
LETTER = {'x': CONST['EXCLUSIVE'], 'rw': CONST['WRITE'], 's': CONST['PERMIT']}
# Contended cycles whose every call is logged, for the medians of its two calls.
SAMPLE = 3000

class Functions:
    """A tree with the library: FCALL of its functions."""
    stat = 'fcall'
    def __init__(self, lib):
        self.lib = lib
    def label(self, name):
        return '%s (FCALL %s)' % (name, self.lib.name)
    def keys(self, mode, name):
        return cycle.keys(self.lib, mode, name)
    def load(self, c, mode):
        """The words before the keys of its acquire and release calls."""
        self.lib.load(c)
        op = lambda o: ['FCALL', self.lib.fn(cycle.KIND[mode][1] + o)]
        return op('acquire'), op('release')
    def renew(self, c, mode, ks, owner):
        """Extends `owner`'s hold to its lease, as its client does when its grant arrives: a
        hold granted by message lives a claim (1.5 s) until then, and the profiler's pauses
        between replays (writing the next one, counting) can outlast it."""
        c.cmd('FCALL', self.lib.fn('renew'), 1, ks[0], owner, cycle.LEASE_MS, LETTER[mode])

class Scripts:
    """A tree from before the library: EVALSHA of the scripts its own resp.py assembles."""
    stat = 'evalsha'
    FILES = {'x': ('acquire.lua', 'release.lua'), 's': ('sem_acquire.lua', 'sem_release.lua'),
             'rw': ('rw_acquire.lua', 'rw_release.lua')}
    def __init__(self, resp, old_cycle):
        self.resp, self.cycle = resp, old_cycle
    def label(self, name):
        return '%s (EVALSHA)' % name
    def keys(self, mode, name):
        return self.cycle.keys(mode, name)
    def load(self, c, mode):
        srcs = (self.resp.assemble(self.resp.rd(f), mode) for f in self.FILES[mode])
        return [['EVALSHA', c.cmd('SCRIPT', 'LOAD', s).decode()] for s in srcs]
    def renew(self, c, mode, ks, owner):
        """Nothing: before the library, a hand-off granted the waiter's whole lease."""

def tree(rev, root):
    """The protocol of commit `rev` (None: this tree's)."""
    if rev is None:
        return Functions(library())
    show = lambda path: subprocess.run(['git', '-C', root, 'show', '%s:%s' % (rev, path)],
                                       check=True, capture_output=True).stdout
    has = lambda path: subprocess.run(['git', '-C', root, 'cat-file', '-e', '%s:%s' % (rev, path)],
                                      capture_output=True).returncode == 0
    if has(ONE_FILE):
        return Functions(Library(show(ONE_FILE).decode()))
    if has('lock-core/src/protocol/library'):
        src = tempfile.mkdtemp(prefix='distlock-profile-')
        archive = subprocess.run(['git', '-C', root, 'archive', rev], check=True, capture_output=True).stdout
        subprocess.run(['tar', '-x', '-C', src], input=archive, check=True)
        return Functions(library(src, os.path.join(root, 'target', 'compare-' + rev)))
    out = tempfile.mkdtemp(prefix='distlock-profile-')
    os.makedirs(out + '/scripts')
    for f in ('resp.py', 'cycle.py'):
        open('%s/%s' % (out, f), 'wb').write(show('examples/bench/profile/' + f))
    names = subprocess.run(['git', '-C', root, 'ls-tree', '--name-only', rev, 'lock-core/src/protocol/scripts/'],
                           check=True, capture_output=True, text=True).stdout.split()
    for path in names:
        if path.endswith('.lua'):
            open('%s/scripts/%s' % (out, os.path.basename(path)), 'wb').write(show(path))
    return Scripts(*load_modules(out, out + '/scripts/'))

def load_modules(d, scripts):
    """resp.py and cycle.py of directory `d`, reading the scripts in `scripts`."""
    def load(name):
        spec = importlib.util.spec_from_file_location('old_' + name, '%s/%s.py' % (d, name))
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        return m
    saved = sys.modules.get('resp')
    resp = load('resp')
    resp.SCRIPTS = scripts
    sys.modules['resp'] = resp  # its cycle.py imports it by name
    try:
        old_cycle = load('cycle')
    finally:
        sys.modules['resp'] = saved
    return resp, old_cycle

def holds(c, base, ks, owner):
    """Whether `owner` holds the lock of keys `ks`."""
    if base == 's':
        return c.cmd('ZSCORE', ks[0], owner) is not None
    return c.cmd('HGET', ks[0], owner) is not None

def per_acq(st, cpu, n, t):
    return calls(st, t.stat)[1] / n, cpu * 1e6 / n, inner(st)[0] / n

def uncontended_cycles(c, t, mode):
    """An empty server with `t`'s library, and `cycles(first, last)`: the uncontended
    cycles (acquire and release) of names `first` to `last`, each name fresh."""
    c.cmd('FLUSHALL')
    base, cap = BASE.get(mode, mode), CAPACITY.get(mode, 1)
    a, r = t.load(c, base)
    def cycles(first, last):
        for i in range(first, last):
            ks = t.keys(base, 'n%d' % i)
            yield a + [len(ks)] + ks + cycle.acquire_args(base, 0, WAITER_TTL, cap)
            yield r + [len(ks)] + ks + cycle.release_args(base, 0, cap)
    return cycles

def contended_cycles(c, t, mode, waiters):
    """A server with `t`'s library and one name: its holder (owner 0) and `waiters` queued
    (owners 1…). Returns its keys and `cycles(first, last)`: in cycle i, owner i releases
    (handing over to the head, owner i + 1) and owner i + waiters + 1 queues."""
    c.cmd('FLUSHALL')
    base, cap = BASE.get(mode, mode), CAPACITY.get(mode, 1)
    a, r = t.load(c, base)
    ks = t.keys(base, 'L')
    A = lambda i: a + [len(ks)] + ks + cycle.acquire_args(base, i, WAITER_TTL, cap)
    R = lambda i: r + [len(ks)] + ks + cycle.release_args(base, i, cap)
    for x in c.pipe([A(i) for i in range(waiters + 1)]):
        if isinstance(x, Exception): raise x
    def cycles(first, last):
        for i in range(first, last):
            yield R(i); yield A(i + waiters + 1)
    return ks, cycles

def uncontended(port, t, mode, n):
    c = Conn(port)
    st, cpu = replay(port, uncontended_cycles(c, t, mode)(0, n))
    assert c.cmd('DBSIZE') == 0, 'the uncontended cycle left keys'
    return per_acq(st, cpu, n, t)

def contended(port, t, mode, waiters, n):
    """As `per_acq`, then the median µs of a hand-off (release) and of a busy acquire, from
    SLOWLOG on SAMPLE more cycles (it logs every call, those inside functions and scripts
    too)."""
    c = Conn(port)
    base = BASE.get(mode, mode)
    ks, cycles = contended_cycles(c, t, mode, waiters)
    # A cycle's two calls, whose first words name them in the log.
    r, a = cycles(0, 1)
    st, cpu = replay(port, cycles(0, n))
    assert holds(c, base, ks, cycle.owner(base, n)), 'the chain of hand-offs broke'
    t.renew(c, base, ks, cycle.owner(base, n))
    k = min(n, SAMPLE)
    c.cmd('CONFIG', 'SET', 'slowlog-max-len', str(40 * k)); c.cmd('SLOWLOG', 'RESET')
    c.cmd('CONFIG', 'SET', 'slowlog-log-slower-than', '0')
    replay(port, cycles(n, n + k))
    # Before reading the log, which can take longer than the last grant's claim.
    assert holds(c, base, ks, cycle.owner(base, n + k)), 'the chain of hand-offs broke'
    c.cmd('CONFIG', 'SET', 'slowlog-log-slower-than', '10000')
    per = {}
    for e in c.cmd('SLOWLOG', 'GET', str(40 * k)):
        per.setdefault((e[3][0].lower(), tuple(e[3][1:2])), []).append(e[2])
    c.cmd('SLOWLOG', 'RESET')
    med = lambda words: sorted(per[(words[0].lower().encode(), (words[1].encode(),))])[k // 2]
    return per_acq(st, cpu, n, t) + (med(r), med(a))

def main():
    p = argparse.ArgumentParser()
    p.add_argument('--against', default='HEAD'); p.add_argument('--waiters', type=int, default=64)
    p.add_argument('--cycles', type=int, default=30000); p.add_argument('--rounds', type=int, default=5)
    o = p.parse_args()
    root = subprocess.run(['git', 'rev-parse', '--show-toplevel'], capture_output=True, text=True, check=True).stdout.strip()
    trees = {o.against: tree(o.against, root), 'this tree': tree(None, root)}
    server, port = start_server(pinned=True)
    # Two processes waiting, as two clients would listen: on the channels every grant of a
    # name went to before grants had a channel per client (both hear each grant there), and
    # on each client's own grants channel (the waiters' client hears each grant). The names
    # are this tree's library's; the older trees' are the same.
    const = trees['this tree'].lib.const
    shared = [const[c] + '{lk:L}' for c in ('GRANTS_PREFIX', 'SEMAPHORE_CHANNEL')]
    own = [const['GRANTS_PREFIX'] + '{lk:L}:' + client
           for client in (cycle.OWNER.split(':')[0], 'another-client')]
    subs = [drain(port, ch) for ch in shared for _ in range(2)] + [drain(port, ch) for ch in own]
    try:
        res = {}
        for _ in range(o.rounds):
            for mode in MODES:
                for name, t in trees.items():
                    res.setdefault((name, mode, 'u'), []).append(uncontended(port, t, mode, o.cycles))
                    res.setdefault((name, mode, 'c'), []).append(contended(port, t, mode, o.waiters, o.cycles))
        # The least disturbed round: on a shared VM the noise only ever adds time.
        least = lambda xs, j: min(x[j] for x in xs)
        print('load: %s; %d waiters, %d cycles, the least of %d rounds' % (open('/proc/loadavg').read().split()[:3], o.waiters, o.cycles, o.rounds))
        print('\n| kind | protocol | uncontended µs/cycle (cpu) | calls | contended µs/acq (cpu) | calls | contended ÷ uncontended (cpu) | hand-off µs, median | busy acquire µs, median |')
        print('|---|---|---:|---:|---:|---:|---:|---:|---:|')
        for mode in MODES:
            for name, t in trees.items():
                u, c = res[(name, mode, 'u')], res[(name, mode, 'c')]
                print('| %s | %s | %.1f (%.1f) | %.0f | %.1f (%.1f) | %.0f | %.2f (%.2f) | %d | %d |' % (
                    TITLE[mode], t.label(name), least(u, 0), least(u, 1), least(u, 2), least(c, 0), least(c, 1), least(c, 2),
                    least(c, 0) / least(u, 0), least(c, 1) / least(u, 1), least(c, 3), least(c, 4)))
    finally:
        for s in subs: s.s.close()
        server.kill()

if __name__ == '__main__':
    main()
