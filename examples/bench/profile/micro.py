from resp import *
from cycle import keys, META
import sys
def micro(c, src, args_fn, n=5000, setup=None):
    sha = c.cmd('SCRIPT', 'LOAD', src).decode()
    if setup: setup()
    c.cmd('CONFIG', 'SET', 'slowlog-log-slower-than', '0'); c.cmd('CONFIG', 'SET', 'slowlog-max-len', str(n + 10)); c.cmd('SLOWLOG', 'RESET')
    c.cmd('CONFIG', 'RESETSTAT')
    for i in range(0, n, 250):
        for r in c.pipe([['EVALSHA', sha] + args_fn(j) for j in range(i, min(n, i + 250))]):
            if isinstance(r, Exception): raise r
    st = commandstats(c)
    log = c.cmd('SLOWLOG', 'GET', str(n + 10))
    d = sorted(e[2] for e in log if e[3][0].lower() == b'evalsha')
    c.cmd('CONFIG', 'SET', 'slowlog-log-slower-than', '10000')
    ev = st['evalsha']
    inner = sum(v[0] for k, v in st.items() if k not in ('evalsha', 'config|resetstat', 'config', 'info', 'script'))
    return d[len(d) // 2], ev[1] / ev[0], inner / ev[0]
def cut(src, after, ret='{0}'):
    """`src` returning right after the line(s) `after` (a whole `if` block when it ends one)."""
    i = src.index(after) + len(after)
    j = src.index('\n', i) + 1
    if after.rstrip().endswith('then'):
        # the check itself, not its block: skip to the block's `end`
        j = src.index('\nend\n', i) + 5
    return src[:j] + 'do return %s end\n' % ret + src[j:]
