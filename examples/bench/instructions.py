#!/usr/bin/env python3
"""Instructions redis-server executes per decision (callgrind): a cost that
does not depend on the machine's load, where CPU time does.

    cargo build --release --example bench
    examples/bench/instructions.py gcra batch      # the script, batches of 16 (every key declared)
    examples/bench/instructions.py gcra one        # the script, one decision per EVALSHA
    examples/bench/instructions.py gcra client     # the same on the client's clock (`now` sent, as the peers send theirs)
    examples/bench/instructions.py gcra cell       # redis-cell's CL.THROTTLE (the same gcra policy)
    examples/bench/instructions.py sliding_log batch 8
    examples/bench/instructions.py sliding_window peer  # the best peer's script, as `--only peers` calls it
    POLICY=$(python3 -c "import struct; print(struct.pack('<ddd', 1e6, 1000, 3600e6).hex())") \
      examples/bench/instructions.py sliding_window one   # 1000 per hour in sub-windows of a second

The script and the policy's numbers are the runtime's for the bench's policy
of that algorithm on Redis's clock (`bench --script <algorithm>`). It starts
its own redis-server under valgrind's callgrind on a free loopback port
(never one it did not start), with redis-cell loaded for `cell`
(../shared/bench/redis-cell/libredis_cell.so, or REDLIMIT_BENCH_REDIS_CELL),
sends 16 000 decisions pipelined over 64 keys (so keys stay alive however
slow the run is), then counts the next 8 000 (DECISIONS) and prints their
mean. KEYS=10000 spreads them over the bench's 10,000 users instead: each
key is then met about once a second under valgrind, nearer the bench's
traffic (keys made, expired and written afresh). Needs valgrind, redis-server and python3; BENCH names another build.
"""
import glob, os, socket, subprocess, sys, tempfile, time

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
algo, mode = sys.argv[1], sys.argv[2]
size = int(sys.argv[3]) if len(sys.argv) > 3 else 16
decisions = int(os.environ.get('DECISIONS', '8000'))
keys = int(os.environ.get('KEYS', '64'))
bench = os.environ.get('BENCH', os.path.join(os.environ.get('CARGO_TARGET_DIR', os.path.join(root, 'target')), 'release/examples/bench'))
printed = subprocess.run([bench, '--script', algo] + (['client'] if mode == 'client' else []), check=True, capture_output=True).stdout
policy_hex, source = printed.split(b'\n', 1)
# POLICY gives other policy numbers (hex, as `bench --script` prints them):
# a sliding window of 3,600 sub-windows, say, with the same script.
policy = bytes.fromhex(os.environ.get('POLICY', policy_hex.decode()))
# SOURCE names another script to run with the runtime's arguments (an edited
# copy of lua/assembled/<algorithm>.lua, say), so a change is measured
# without a rebuild.
if os.environ.get('SOURCE'):
    source = open(os.environ['SOURCE'], 'rb').read()
peers = os.environ.get('REDLIMIT_BENCH_PEERS', os.path.join(root, '../shared/bench/peers'))
cell = os.environ.get('REDLIMIT_BENCH_REDIS_CELL', os.path.join(root, '../shared/bench/redis-cell/libredis_cell.so'))


def command(args):
    parts = [b'*%d\r\n' % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(parts)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


out = tempfile.mkdtemp()
port = free_port()
server = subprocess.Popen(
    ['valgrind', '--tool=callgrind', '--instr-atstart=no', '--callgrind-out-file=' + out + '/cg.%p',
     # No slowlog: under valgrind every script call is slow, and copying its
     # arguments into an entry would count as the script's cost.
     'redis-server', '--port', str(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
     '--slowlog-log-slower-than', '-1']
    + (['--loadmodule', cell] if mode == 'cell' else []),
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(300):
    try:
        con = socket.create_connection(('127.0.0.1', port))
        break
    except OSError:
        time.sleep(0.1)
replies = con.makefile('rb')


def read():
    line = replies.readline()
    if line[:1] == b'$':
        n = int(line[1:])
        return None if n < 0 else replies.read(n + 2)[:-2]
    if line[:1] == b'*':
        return [read() for _ in range(int(line[1:]))]
    if line[:1] == b'-':
        sys.exit('redis-server answered ' + line.decode().strip())
    return line[1:-2]


# The best peer per algorithm in `--only peers`, with the KEYS and ARGV its
# client sends for the bench's policy (../shared/bench/peers/README.md).
def peer_call(key):
    ms = int(time.time() * 1000)
    if algo == 'fixed_window':
        return 'go-zero/periodscript.lua', ['periodlimit:' + key], [1000, 1]
    if algo == 'sliding_window':
        w = ms // 1000
        return 'upstash-ratelimit/slidingWindowLimitScript.lua', [
            '@upstash/ratelimit:%s:%d' % (key, w), '@upstash/ratelimit:%s:%d' % (key, w - 1), ''], [1000, ms, 1000, 1]
    if algo == 'sliding_log':
        return 'limits/acquire_moving_window.lua', ['LIMITS:LIMITER/%s/1000/1/second' % key], [repr(time.time()), 1000, 1, 1]
    if algo == 'token_bucket':
        return 'go-zero/tokenscript.lua', ['{%s}.tokens' % key, '{%s}.ts' % key], [1000, 1000, ms // 1000, 1]
    if algo == 'leaky_bucket':
        return 'throttled-py/leaking_bucket.lua', ['throttled:v1:leaking_bucket:' + key], ['1000.0', 1000, 1]
    if algo == 'gcra':
        return 'redis_rate/allow_n.lua', ['rate:' + key], [1000, 1000, 1, 1]
    sys.exit('no peer for ' + algo)


if mode == 'peer':
    source = open(os.path.join(peers, peer_call('u')[0]), 'rb').read()
con.sendall(command(['SCRIPT', 'LOAD', source]))
sha = read()
user = 0


def next_key():
    global user
    user += 1
    return 'user:%d' % (user % keys)


def request():
    if mode == 'cell':
        return command(['CL.THROTTLE', next_key(), 999, 1000, 1, 1])
    if mode == 'one':
        return command(['EVALSHA', sha, 1, next_key(), policy])
    if mode == 'client':
        # cost 1, a check, the client's µs (the common call sends nothing
        # else on Redis's clock).
        return command(['EVALSHA', sha, 1, next_key(), policy, 1, '0', int(time.time() * 1e6)])
    if mode == 'peer':
        _, ks, argv = peer_call(next_key())
        return command(['EVALSHA', sha, len(ks)] + ks + argv)
    batch = [next_key() for _ in range(size)]
    # Every key declared; the count, no words (every call is the common
    # call), the one policy.
    return command(['EVALSHA', sha, size] + batch + [size, b'', policy])


per_request = size if mode == 'batch' else 1


def run(n):
    requests = n // per_request
    for at in range(0, requests, 50):
        m = min(50, requests - at)
        con.sendall(b''.join(request() for _ in range(m)))
        for _ in range(m):
            read()


run(16000)
subprocess.run(['callgrind_control', '-i', 'on', str(server.pid)], stdout=subprocess.DEVNULL)
run(decisions)
subprocess.run(['callgrind_control', '-i', 'off', str(server.pid)], stdout=subprocess.DEVNULL)
subprocess.run(['callgrind_control', '-d', str(server.pid)], stdout=subprocess.DEVNULL)
time.sleep(1)
con.sendall(command(['SHUTDOWN', 'NOSAVE']))
server.wait()
total = 0
for name in glob.glob(out + '/cg.*'):
    for line in open(name):
        # A part's `totals:` closes it (its `summary:` line may read 0).
        if line.startswith('totals:'):
            total += int(line.split()[1])
label = {'batch': 'batches of %d' % size, 'one': 'one per EVALSHA', 'client': 'one per EVALSHA on the client clock', 'cell': 'CL.THROTTLE',
         'peer': 'best peer, ' + peer_call('u')[0]}[mode]
print('%s %s: %d instructions per decision (%s)' % (algo, label, total // decisions, out))
