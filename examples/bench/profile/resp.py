import socket, subprocess, time, os, threading, re, sys
SCRIPTS = os.environ.get('DISTLOCK_SCRIPTS', os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../../lock-core/src/protocol/scripts/'))
def enc(*args):
    out = [b'*%d\r\n' % len(args)]
    for a in args:
        if isinstance(a, int): a = str(a)
        if isinstance(a, str): a = a.encode()
        out.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(out)
class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(('127.0.0.1', port)); self.f = self.s.makefile('rb')
    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t in (b'+',): return rest.decode()
        if t == b'-': return Exception(rest.decode())
        if t == b':': return int(rest)
        if t == b'$':
            n = int(rest)
            if n < 0: return None
            d = self.f.read(n + 2); return d[:-2]
        if t == b'*':
            n = int(rest)
            if n < 0: return None
            return [self.read() for _ in range(n)]
        raise ValueError(line)
    def cmd(self, *a):
        self.s.sendall(enc(*a)); r = self.read()
        if isinstance(r, Exception): raise r
        return r
    def pipe(self, cmds):
        self.s.sendall(b''.join(enc(*c) for c in cmds))
        return [self.read() for _ in cmds]
def free_port():
    s = socket.socket(); s.bind(('127.0.0.1', 0)); p = s.getsockname()[1]; s.close(); return p
def start_server(pinned=False):
    """A private redis-server on a free loopback port. `pinned`: on its own CPU (the last),
    with this process and its children on the others, so that the client's work never
    preempts Redis mid-command (commandstats times a command by the wall clock)."""
    port = free_port()
    cpus = sorted(os.sched_getaffinity(0))
    pre = []
    if pinned and len(cpus) > 1:
        pre = ['taskset', '-c', str(cpus[-1])]
        os.sched_setaffinity(0, cpus[:-1])
    p = subprocess.Popen(pre + [os.environ.get('REDIS_SERVER_BIN', 'redis-server'), '--bind', '127.0.0.1', '--port', str(port), '--save', '', '--appendonly', 'no'], stdout=subprocess.DEVNULL)
    for _ in range(100):
        try: Conn(port).cmd('PING'); return p, port
        except Exception: time.sleep(0.05)
    raise RuntimeError('no server')
def rd(name): return open(SCRIPTS + name).read()
MODES = {'x': ('key, queue, fence', 'holders', 'redisson_lock__channel:', 'distlock__grant:'),
         'rw': ('key, queue, fence', 'holders', 'redisson_rwlock:', 'distlock__grant:'),
         's': ('key, queue, holders', 'fence', 'distlock__semaphore:', 'distlock__grant:')}
# The arguments each script reads, by the first word of its header comment, in the order of
# lock-core's kind files (protocol/kind/*.rs): the header binds them to Lua locals.
ARGS = {'ACQUIRE': 'lease_ms owner meta waiter_ttl_ms publish', 'RELEASE': 'owner lease_ms publish meta',
        'RW_ACQUIRE': 'lease_ms owner meta waiter_ttl_ms publish side', 'RW_RELEASE': 'owner lease_ms publish meta',
        'SEM_ACQUIRE': 'lease_ms owner meta waiter_ttl_ms publish capacity',
        'SEM_RELEASE': 'owner lease_ms publish capacity meta'}
def header(mode, body=''):
    """As lock-core's protocol/scripts.rs `header`: keys and arguments as named locals, constants."""
    names, absent, chan, grants = MODES[mode]
    first = re.match(r'-- (\w+):', body)
    args = ARGS.get(first.group(1), '').split() if first else []
    argv = ('local %s = %s\n' % (', '.join(args), ', '.join('ARGV[%d]' % (i + 1) for i in range(len(args))))) if args else ''
    return (f"local {names} = KEYS[1], KEYS[2], KEYS[3]\nlocal {absent} = nil\n{argv}"
            "local HOLDER_FIELD = 'distlock:holder'\nlocal LIVE_BASE = 9000000000000000\nlocal WAITER_TTL_MIN = 6000\nlocal HOLDERS_PREFIX = 'distlock__holders:'\n"
            f"local CHANNEL_PREFIX = '{chan}'\nlocal GRANTS_PREFIX = '{grants}'\nlocal GRANT_PREFIX = 'distlock:grant:'\n"
            "local RELEASE_MESSAGE = '0'\nlocal WRITE_RELEASE_MESSAGE = '1'\n")
def helpers(prelude):
    """The `local function`s of a prelude, in order: (name, text)."""
    out, name, lines = [], None, []
    for line in prelude.splitlines(keepends=True):
        if line.startswith('local function '):
            name, lines = line[len('local function '):].split('(')[0], [line]
        elif name:
            lines.append(line)
            if line.rstrip() == 'end':
                out.append((name, ''.join(lines))); name = None
    return out
def calls(code, name):
    return re.search(r'(?<![A-Za-z0-9_])%s\(' % re.escape(name), code) is not None
def link(hs, code, defined):
    """As lock-core's protocol/scripts.rs `link`: the helpers not yet defined that the code
    calls, and theirs."""
    needed = [calls(code, n) for n, _ in hs]
    for i in range(len(hs) - 1, -1, -1):
        if needed[i]:
            for j in range(i):
                needed[j] = needed[j] or calls(hs[i][1], hs[j][0])
    out = ''
    for i, ((n, t), k) in enumerate(zip(hs, needed)):
        if k and not defined[i]:
            out += t; defined[i] = True
    return out
def assemble(body, mode):
    """As lock-core's `assemble`: each `-- @prelude` marker defines the helpers first called
    between it and the next."""
    hs = helpers(rd('prelude.lua') + {'x': '', 'rw': rd('rw_prelude.lua'), 's': rd('sem_prelude.lua')}[mode])
    defined = [False] * len(hs)
    parts = body.split('-- @prelude')
    out = header(mode, body) + parts[0]
    for seg in parts[1:]:
        scope, code = seg.split('\n', 1)
        outside = list(defined) if scope == ': this block' else None
        out += link(hs, code, defined) + code
        defined = outside if outside is not None else defined
    return inline(out, snippets(rd('prelude.lua')))
def snippets(prelude):
    """As lock-core's `snippets`: name -> code lines of each `-- @snippet` of `prelude`."""
    out, lines = {}, iter(prelude.split('\n'))
    for line in lines:
        if line.startswith('-- @snippet '):
            name = re.split('[: ]', line[len('-- @snippet '):])[0]
            code = []
            for l in lines:
                if l == '-- @end': break
                if code or not l.startswith('--'): code.append(l)
            out[name] = code
    return out
def inline(script, snippets):
    """As lock-core's `inline`: each `-- @inline <name>` line becomes that snippet."""
    out = []
    for line in script.split('\n'):
        code = line.lstrip()
        if code.startswith('-- @inline '):
            indent = line[:len(line) - len(code)]
            out += [indent + l for l in snippets[code[len('-- @inline '):].strip()]]
        else:
            out.append(line)
    return '\n'.join(out)
def commandstats(c):
    info = c.cmd('INFO', 'commandstats').decode()
    out = {}
    for m in re.finditer(r'cmdstat_(\S+):calls=(\d+),usec=(\d+)', info):
        out[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return out
def drain(port, channel, pattern=False):
    c = Conn(port)
    c.s.sendall(enc('PSUBSCRIBE' if pattern else 'SUBSCRIBE', channel))
    def run():
        try:
            while c.f.read(65536): pass
        except Exception: pass
    threading.Thread(target=run, daemon=True).start()
    return c
