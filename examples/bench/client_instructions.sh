#!/usr/bin/env bash
# Client instructions per decision of the bench's Redis cases: what the
# runtime adds to a raw EVALSHA, in a count that does not depend on the
# machine's load (BENCHMARKS.md, "The client's cost per decision").
#
#   cargo build --release --example bench
#   examples/bench/client_instructions.sh fixed_window/script fixed_window/limiter fixed_window/macro
#
# Each case runs in its own process under valgrind's callgrind (`bench
# --count <case>`, which starts its own redis-server on a free loopback
# port); only the counted calls are collected. CALLS (default 12800) sets
# how many, BENCH to use another build of the bench.
#
# memory/governor, memory/backend, memory/limiter and memory/macro count the
# memory section's gcra check instead (no Redis, one call at a time):
#   CALLS=100000 examples/bench/client_instructions.sh memory/governor memory/backend memory/limiter memory/macro
set -euo pipefail
calls="${CALLS:-12800}"
bench="${BENCH:-target/release/examples/bench}"
for case in "$@"; do
  out="$(mktemp -d)"
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*counted_calls*' --toggle-collect='*counted_memory_calls*' \
    --callgrind-out-file="$out/cg" "$bench" --count "$case" --calls "$calls" >/dev/null 2>"$out/log" \
    || { tail -5 "$out/log"; rm -rf "$out"; exit 1; }
  total="$(grep -E '^(summary|totals):' "$out/cg" | tail -1 | awk '{print $2}')"
  echo "$case: $((total / calls)) instructions per decision ($calls calls)"
  rm -rf "$out"
done
