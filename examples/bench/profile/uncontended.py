from cycle import *
def uncontended(mode, a_src, r_src, port, n=10000):
    c = Conn(port); c.cmd('FLUSHALL')
    a = c.cmd('SCRIPT', 'LOAD', a_src).decode(); r = c.cmd('SCRIPT', 'LOAD', r_src).decode()
    c.cmd('CONFIG', 'SET', 'slowlog-log-slower-than', '0'); c.cmd('CONFIG', 'SET', 'slowlog-max-len', str(2 * n + 10)); c.cmd('SLOWLOG', 'RESET'); c.cmd('CONFIG', 'RESETSTAT')
    cpu0 = cpu(c)
    o = 'a3f1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d:1' + (':write' if mode == 'rw' else '')
    for base in range(0, n, 250):
        cmds = []
        for i in range(base, min(n, base + 250)):
            ks = keys(mode, 'n%d' % i)
            aa = [30000, o, META, 60000, 'publish'] + (['write'] if mode == 'rw' else []) + ([1] if mode == 's' else [])
            ra = [o, 30000, 'publish'] + ([1] if mode == 's' else [])
            cmds.append(['EVALSHA', a, len(ks)] + ks + aa); cmds.append(['EVALSHA', r, len(ks)] + ks + ra)
        for x in c.pipe(cmds):
            if isinstance(x, Exception): raise x
    st = commandstats(c); cpu1 = cpu(c)
    log = c.cmd('SLOWLOG', 'GET', str(2 * n + 10))
    d = {}
    for e in log:
        if e[3][0].lower() == b'evalsha': d.setdefault(e[3][1].decode(), []).append(e[2])
    med = lambda xs: sorted(xs)[len(xs) // 2]
    inner = sum(v[0] for k, v in st.items() if k not in ('evalsha', 'info', 'config|resetstat', 'config|set', 'slowlog|reset', 'script|load'))
    return dict(med_acq=med(d[a]), med_rel=med(d[r]), us_cycle=st['evalsha'][1] / n, cpu_us_cycle=(cpu1 - cpu0) * 1e6 / n, inner_per_cycle=inner / n, keys=c.cmd('DBSIZE'))
if __name__ == '__main__':
    p, port = start_server()
    try:
        for mode in ('x', 's', 'rw'):
            a = assemble(rd({'x': 'acquire.lua', 's': 'sem_acquire.lua', 'rw': 'rw_acquire.lua'}[mode]), mode)
            r = assemble(rd({'x': 'release.lua', 's': 'sem_release.lua', 'rw': 'rw_release.lua'}[mode]), mode)
            print(mode, {k: round(v, 2) for k, v in uncontended(mode, a, r, port).items()})
    finally: p.kill()
