"""Redis' own instructions per cycle, this tree's protocol beside another commit's, counted
by valgrind's callgrind in one private redis-server that has both libraries loaded.

Timings of a few µs move with whatever else the machine does (compare.py takes the least of
rounds to damp it); instruction counts do not: the same binary, inputs and commands count the
same, loaded machine or not. So this answers "is the new protocol dearer for Redis?" with a
number that needs no quiet machine, and `--rounds` shows how far it repeats.

Each cycle is compare.py's: uncontended (acquire and release a fresh name) and contended
(the holder releases to the head of W queued waiters and queues again). The count covers
everything the server does for the cycles (reading, parsing, the function, its calls,
replying) and is zeroed after warm-up cycles, so loading and first calls are left out.

    python3 examples/bench/profile/instructions.py [--against REV] [--cycles N] [--rounds R]
"""
import argparse, glob, os, re, shutil, subprocess, tempfile, time
from resp import Conn, free_port
from pipe import replay
import compare, cycle

WARM = 200
# Work the server does by the clock, not per command, which would count in proportion to
# valgrind's slowness: its periodic tasks at their rarest, and no rehashing of the keyspace
# on their timer (a command still rehashes incrementally as it goes).
QUIET = ['--hz', '1', '--activerehashing', 'no']

def start_callgrind(out):
    """redis-server under callgrind on a free loopback port; its dumps go to `out`."""
    port = free_port()
    p = subprocess.Popen(['valgrind', '--tool=callgrind', '--callgrind-out-file=%s/cg.%%p' % out,
                          os.environ.get('REDIS_SERVER_BIN', 'redis-server'), '--bind', '127.0.0.1',
                          '--port', str(port), '--save', '', '--appendonly', 'no'] + QUIET,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            Conn(port).cmd('PING')
            return p, port
        except Exception:
            time.sleep(0.1)
    p.kill()
    raise RuntimeError('redis-server did not start under valgrind')

def control(pid, *args):
    """callgrind_control on the server (it answers between two of its event-loop turns)."""
    subprocess.run(['callgrind_control'] + list(args) + [str(pid)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)

def counted(pid, out, port, commands):
    """Instructions the server ran for `commands`: counters zeroed, commands replayed, dumped."""
    before = set(glob.glob(out + '/cg.*'))
    control(pid, '--zero')
    replay(port, commands)
    control(pid, '--dump')
    (dump,) = set(glob.glob(out + '/cg.*')) - before
    text = open(dump).read()
    os.unlink(dump)
    return int(re.search(r'^(?:summary|totals): (\d+)', text, re.M).group(1))

def uncontended(port, pid, out, t, mode, n):
    c = Conn(port)
    cycles = compare.uncontended_cycles(c, t, mode)
    replay(port, cycles(0, WARM))
    ins = counted(pid, out, port, cycles(WARM, WARM + n))
    assert c.cmd('DBSIZE') == 0, 'the uncontended cycle left keys'
    return ins / n

def contended(port, pid, out, t, mode, waiters, n):
    c = Conn(port)
    base = compare.BASE.get(mode, mode)
    ks, cycles = compare.contended_cycles(c, t, mode, waiters)
    replay(port, cycles(0, WARM))
    t.renew(c, base, ks, cycle.owner(base, WARM))
    ins = counted(pid, out, port, cycles(WARM, WARM + n))
    assert compare.holds(c, base, ks, cycle.owner(base, WARM + n)), 'the chain of hand-offs broke'
    return ins / n

def main():
    p = argparse.ArgumentParser()
    p.add_argument('--against', default='HEAD'); p.add_argument('--waiters', type=int, default=64)
    p.add_argument('--cycles', type=int, default=2000); p.add_argument('--rounds', type=int, default=2)
    o = p.parse_args()
    root = subprocess.run(['git', 'rev-parse', '--show-toplevel'], capture_output=True, text=True, check=True).stdout.strip()
    trees = {o.against: compare.tree(o.against, root), 'this tree': compare.tree(None, root)}
    out = tempfile.mkdtemp(prefix='distlock-callgrind-')
    server, port = start_callgrind(out)
    # The waiters' client listens, as in compare.py: hand-offs publish grants to it.
    const = trees['this tree'].lib.const
    subs = [compare.drain(port, const['GRANTS_PREFIX'] + '{lk:L}:' + cycle.OWNER.split(':')[0])]
    try:
        res = {}
        for _ in range(o.rounds):
            for mode in compare.MODES:
                for name, t in trees.items():
                    res.setdefault((name, mode, 'u'), []).append(uncontended(port, server.pid, out, t, mode, o.cycles))
                    res.setdefault((name, mode, 'c'), []).append(contended(port, server.pid, out, t, mode, o.waiters, o.cycles))
        print('%d waiters, %d cycles per count, %d rounds; instructions per cycle (each round)' % (o.waiters, o.cycles, o.rounds))
        print('\n| kind | protocol | uncontended | contended |')
        print('|---|---|---:|---:|')
        fmt = lambda xs: ' / '.join('{:,.0f}'.format(x) for x in xs)
        for mode in compare.MODES:
            for name, t in trees.items():
                print('| %s | %s | %s | %s |' % (compare.TITLE[mode], t.label(name),
                      fmt(res[(name, mode, 'u')]), fmt(res[(name, mode, 'c')])))
        # The median, not the least: a count's noise (how the server's reads split the
        # stream, its timers) goes both ways.
        print('\n| kind | new ÷ old, uncontended | new ÷ old, contended |')
        print('|---|---:|---:|')
        (a, b) = trees
        median = lambda xs: sorted(xs)[len(xs) // 2]
        for mode in compare.MODES:
            ratio = lambda k: median(res[(b, mode, k)]) / median(res[(a, mode, k)])
            print('| %s | %.3f | %.3f |' % (compare.TITLE[mode], ratio('u'), ratio('c')))
    finally:
        for s in subs: s.s.close()
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(out, ignore_errors=True)

if __name__ == '__main__':
    main()
