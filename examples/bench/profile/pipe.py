"""Replays a command stream through `redis-cli --pipe`, which writes it as fast as Redis reads:
Redis never idles between batches, so a command's time in INFO commandstats is not inflated by
a CPU waking from idle (on a VM that alone can double it). Returns the commandstats and the
Redis CPU seconds (used_cpu_user + used_cpu_sys) the replay took."""
import subprocess, tempfile, os
from resp import Conn, enc, commandstats
from cycle import cpu

def replay(port, commands):
    with tempfile.NamedTemporaryFile(suffix='.resp', delete=False) as f:
        for c in commands:
            f.write(enc(*c))
        path = f.name
    try:
        c = Conn(port)
        c.cmd('CONFIG', 'RESETSTAT')
        cpu0 = cpu(c)
        with open(path, 'rb') as stream:
            subprocess.run([os.environ.get('REDIS_CLI_BIN', 'redis-cli'), '-p', str(port), '--pipe'],
                           stdin=stream, stdout=subprocess.DEVNULL, check=True, timeout=600)
        return commandstats(c), cpu(c) - cpu0
    finally:
        os.unlink(path)
