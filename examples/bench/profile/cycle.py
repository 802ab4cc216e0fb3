# Steady contended hand-off: N waiters queued; each cycle: holder releases (hand-off to head),
# then the old holder acquires again (busy: queued at the tail). 2 EVALSHA per acquisition.
import sys, time
from resp import *
def keys(mode, name='L'):
    k = 'lk:' + name
    q = {'x': 'distlock__wait:', 'rw': 'distlock__rwwait:', 's': 'distlock__semwait:'}[mode]
    ks = [k, q + '{' + k + '}']
    if mode == 's': ks.append('distlock__holders:{' + k + '}')
    return ks
META = 'svc\x1fhost\x1f1234\x1freq-1'
def run(mode, acq_src, rel_src, waiters, cycles, port, subs=2, side='write'):
    c = Conn(port)
    c.cmd('FLUSHALL')
    acq = c.cmd('SCRIPT', 'LOAD', acq_src).decode(); rel = c.cmd('SCRIPT', 'LOAD', rel_src).decode()
    ks = keys(mode)
    chan = MODES[mode][2] + '{' + ks[0] + '}'
    subc = [drain(port, chan) for _ in range(subs)]
    def owner(i):
        o = 'a3f1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d:%09d' % i
        return o + ':write' if mode == 'rw' and side == 'write' else o
    def A(i):
        args = [30000, owner(i), META, 60000, 'publish']
        if mode == 'rw': args.append(side)
        if mode == 's': args.append(1)
        return ['EVALSHA', acq, len(ks)] + ks + args
    def R(i):
        args = [owner(i), 30000, 'publish']
        if mode == 's': args.append(1)
        return ['EVALSHA', rel, len(ks)] + ks + args
    # holder 0, waiters 1..N
    for r in c.pipe([A(i) for i in range(waiters + 1)]):
        if isinstance(r, Exception): raise r
    c.cmd('CONFIG', 'SET', 'slowlog-log-slower-than', '0'); c.cmd('CONFIG', 'SET', 'slowlog-max-len', str(2 * cycles + 100)); c.cmd('SLOWLOG', 'RESET')
    c.cmd('CONFIG', 'RESETSTAT')
    cpu0 = cpu(c)
    holder, batch = 0, 200
    done = 0; t0 = time.time()
    nxt = [(i % (waiters + 1)) for i in range(cycles)]
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
    assert st_check(c, ks, owner(cycles)), 'holder is not the expected owner'
    st = commandstats(c); cpu1 = cpu(c)
    ev = st.get('evalsha', (0, 0))
    inner = sum(v[0] for k, v in st.items() if k not in ('evalsha', 'config', 'info', 'script')) 
    innerus = sum(v[1] for k, v in st.items() if k not in ('evalsha', 'config', 'info', 'script'))
    res = dict(us_call=ev[1] / max(ev[0], 1), us_acq=ev[1] / cycles, inner_per_acq=inner / cycles,
               inner_us_acq=innerus / cycles, cpu_us_acq=(cpu1 - cpu0) * 1e6 / cycles, dbsize=c.cmd('DBSIZE'))
    for s in subc: s.s.close()
    log = c.cmd('SLOWLOG', 'GET', str(2 * cycles + 100))
    per = {}
    for e in log:
        a = e[3]
        if a[0].lower() == b'evalsha':
            per.setdefault(a[1].decode(), []).append(e[2])
    med = lambda xs: sorted(xs)[len(xs) // 2] if xs else 0
    res['med_acq'] = med(per.get(acq, [])); res['med_rel'] = med(per.get(rel, []))
    c.cmd('CONFIG', 'SET', 'slowlog-log-slower-than', '10000'); c.cmd('SLOWLOG', 'RESET')
    return res, st
def st_check(c, ks, o):
    return c.cmd('EXISTS', ks[0]) == 1
def cpu(c):
    info = c.cmd('INFO', 'cpu').decode()
    s = float(re.search(r'used_cpu_sys:([\d.]+)', info).group(1)); u = float(re.search(r'used_cpu_user:([\d.]+)', info).group(1))
    return s + u
if __name__ == '__main__':
    p, port = start_server()
    try:
        for w in (4, 64, 512):
            r, st = run('x', assemble(rd('acquire.lua'), 'x'), assemble(rd('release.lua'), 'x'), w, 20000, port)
            print('x', w, {k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()})
        for k, v in sorted(st.items()): print('  ', k, v, round(v[1] / v[0], 2))
    finally:
        p.kill()
