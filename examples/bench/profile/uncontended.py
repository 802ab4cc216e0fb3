from cycle import *
def uncontended(lib, mode, port, n=10000):
    c = Conn(port); c.cmd('FLUSHALL'); lib.load(c)
    c.cmd('CONFIG', 'SET', 'slowlog-log-slower-than', '0'); c.cmd('CONFIG', 'SET', 'slowlog-max-len', str(2 * n + 10)); c.cmd('SLOWLOG', 'RESET'); c.cmd('CONFIG', 'RESETSTAT')
    cpu0 = cpu(c)
    for base in range(0, n, 250):
        cmds = []
        for i in range(base, min(n, base + 250)):
            ks = keys(lib, mode, 'n%d' % i)
            cmds.append(fcall(lib, mode, 'acquire', ks, acquire_args(mode, 1, 60000)))
            cmds.append(fcall(lib, mode, 'release', ks, release_args(mode, 1)))
        for x in c.pipe(cmds):
            if isinstance(x, Exception): raise x
    st = commandstats(c); cpu1 = cpu(c)
    d = slowlog(c, 2 * n + 10)
    med = lambda xs: sorted(xs)[len(xs) // 2]
    prefix = lib.fn(KIND[mode][1])
    return dict(med_acq=med(d[prefix + 'acquire']), med_rel=med(d[prefix + 'release']),
                us_cycle=calls(st, 'fcall')[1] / n, cpu_us_cycle=(cpu1 - cpu0) * 1e6 / n,
                inner_per_cycle=inner(st)[0] / n, keys=c.cmd('DBSIZE'))
if __name__ == '__main__':
    p, port = start_server()
    try:
        for mode in ('x', 's', 'rw'):
            print(mode, {k: round(v, 2) for k, v in uncontended(library(), mode, port).items()})
    finally: p.kill()
