#!/usr/bin/env bash
# Instructions redis-server executes per EVALSHA of one script: a cost that
# does not depend on the machine's load (BENCHMARKS.md, "The scripts by
# instruction count").
#
#   examples/bench/instructions.sh <script.lua> [ARGV...]
#   # a script as the runtime makes it for a policy (ARCHITECTURE.md, "The Lua
#   # contract"): constants, prelude, clock, the algorithm's fragments; the
#   # common call (cost 1, Redis's clock) sends no ARGV
#   examples/bench/instructions.sh <(printf 'local burst, n, p = 999, 1, 1000\n'; cat ratelimit/lua/{prelude,clock,gcra,set_state}.lua)
#   examples/bench/instructions.sh <(printf 'local limits, windows = {1000}, {1000000}\n'; cat ratelimit/lua/{prelude,clock,window,fixed_window}.lua)
#
# Starts its own redis-server under valgrind's callgrind on a free loopback
# port (never one it did not start), loads the script, warms it with
# redis-benchmark (8 clients, 8 pipelined, keys user:0..999), then counts
# the instructions of 8000 more calls and prints their mean. Needs valgrind
# (callgrind_control), redis-server, redis-cli and redis-benchmark.
set -euo pipefail
script="$1"; shift
source_text="$(cat "$script")"
port=7390
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out/cg.%p" \
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 &
server=$!
for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
sha="$(redis-cli -p "$port" SCRIPT LOAD "$source_text")"
calls=8000
redis-benchmark -p "$port" -n 4000 -c 8 -P 8 -r 1000 EVALSHA "$sha" 1 user:__rand_int__ "$@" >/dev/null 2>&1
callgrind_control -i on "$server" >/dev/null 2>&1
redis-benchmark -p "$port" -n "$calls" -c 8 -P 8 -r 1000 EVALSHA "$sha" 1 user:__rand_int__ "$@" >/dev/null 2>&1
callgrind_control -i off "$server" >/dev/null 2>&1
callgrind_control -d "$server" >/dev/null 2>&1
sleep 1
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$server" 2>/dev/null || true
total=0
for f in "$out"/cg.*; do
  n="$(grep -E '^(summary|totals):' "$f" | tail -1 | awk '{print $2}')"
  total=$((total + ${n:-0}))
done
echo "$((total / calls)) instructions per EVALSHA ($script $*)"
