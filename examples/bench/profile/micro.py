from resp import *
from cycle import slowlog
def micro(c, source, fn, args_fn, n=5000, setup=None):
    """`fn` of library `source`, called n times with `args_fn(j)` (keys and arguments):
    its median µs (SLOWLOG), its mean (commandstats) and the calls made inside it. `setup`
    runs first (it may load another library)."""
    if setup: setup()
    Library(source).load(c)
    c.cmd('CONFIG', 'SET', 'slowlog-log-slower-than', '0'); c.cmd('CONFIG', 'SET', 'slowlog-max-len', str(n + 10)); c.cmd('SLOWLOG', 'RESET')
    c.cmd('CONFIG', 'RESETSTAT')
    for i in range(0, n, 250):
        for r in c.pipe([['FCALL', fn] + args_fn(j) for j in range(i, min(n, i + 250))]):
            if isinstance(r, Exception): raise r
    st = commandstats(c)
    d = sorted(slowlog(c, n + 10)[fn])
    fc = calls(st, 'fcall')
    return d[len(d) // 2], fc[1] / fc[0], inner(st)[0] / fc[0]
def tiny(body, name='profile_micro'):
    """A library of one function `name` (keys and arguments as KEYS and ARGV) running `body`."""
    return "#!lua name=%s\nredis.register_function('%s', function(KEYS, ARGV)\n%s\nend)\n" % (name, name, body)
def cut(source, fn, after, ret='{0}'):
    """Library `source` with its local function `fn` returning right after the line(s)
    `after` in it."""
    i = source.index(after, source.index('local function %s(' % fn)) + len(after)
    j = source.index('\n', i) + 1
    return source[:j] + 'do return %s end\n' % ret + source[j:]
