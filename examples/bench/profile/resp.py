"""The profiler's plumbing: a RESP client, a private redis-server, Redis' counters, and
distlock's Redis Functions library as lock-core loads it (`distlock functions source`)."""
import socket, subprocess, time, os, threading, re

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../..')
# What lock-core calls each kind's queue and a writer's owner: read from its Rust source
# (LockMode's `queue_prefix` and `owner_suffix`), the one place they are spelled.
KINDS = os.path.join(ROOT, 'lock-core/src/protocol/kind/mod.rs')

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

class Library:
    """A Redis Functions library's source, as FUNCTION LOAD takes it: its name (first line)
    and its constants (`local NAME = 'text'` or a number, at the start of a line)."""
    def __init__(self, source):
        self.source = source
        self.name = re.match(r'#!lua name=(\S+)', source).group(1)
        self.const = {n: int(num) if num else v for n, v, num in
                      re.findall(r"^local ([A-Z_]+) = (?:'([^']*)'|(\d+))$", source, re.M)}
    def load(self, c):
        """Loads it (again: another text under the same name is replaced)."""
        c.cmd('FUNCTION', 'LOAD', 'REPLACE', self.source)
    def fn(self, name):
        """A function's registered name: its version's PREFIX and `name`."""
        return self.const['PREFIX'] + name
def library(root=ROOT, target=None):
    """The library of the tree at `root`, as its CLI prints it (`distlock functions
    source`), built in `target` (default: the tree's own target directory)."""
    env = dict(os.environ, CARGO_TARGET_DIR=target) if target else None
    text = subprocess.run(['cargo', 'run', '-q', '-p', 'distlock-cli', '--', 'functions', 'source'],
                          cwd=root, env=env, check=True, capture_output=True, text=True).stdout
    return Library(text)

def lock_mode(method, path=KINDS):
    """`LockMode::<method>`'s answer per variant, from its `match` in lock-core."""
    text = open(path).read()
    body = text[text.index('fn %s(' % method):]
    body = body[:body.index('\n    }\n')]
    return {v: s for arm, s in re.findall(r'((?:Self::\w+(?: \| )?)+) => "([^"]*)"', body)
            for v in re.findall(r'Self::(\w+)', arm)}

def commandstats(c):
    info = c.cmd('INFO', 'commandstats').decode()
    out = {}
    for m in re.finditer(r'cmdstat_(\S+):calls=(\d+),usec=(\d+)', info):
        out[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return out
# The commands a client sends (the calls of the protocol and the profiler's own admin):
# the rest ran inside a function or script.
SENT = ('fcall', 'fcall_ro', 'function', 'evalsha', 'eval', 'script', 'config', 'info', 'slowlog')
def calls(st, name):
    """(calls, µs) of the protocol's calls named `name` ('fcall': FCALL and FCALL_RO)."""
    names = ('fcall', 'fcall_ro') if name == 'fcall' else (name,)
    got = [st.get(n, (0, 0)) for n in names]
    return sum(g[0] for g in got), sum(g[1] for g in got)
def inner(st):
    """(calls, µs) of the commands run inside functions or scripts."""
    got = [v for k, v in st.items() if k.split('|')[0] not in SENT]
    return sum(g[0] for g in got), sum(g[1] for g in got)
def drain(port, channel, pattern=False):
    c = Conn(port)
    c.s.sendall(enc('PSUBSCRIBE' if pattern else 'SUBSCRIBE', channel))
    def run():
        try:
            while c.f.read(65536): pass
        except Exception: pass
    threading.Thread(target=run, daemon=True).start()
    return c
