#!/usr/bin/env bash
# Instructions redis-server executes per decision of one algorithm's script
# (callgrind): a cost that does not depend on the machine's load. The
# script and its ARGV are the runtime's (binary policy numbers, which
# redis-benchmark cannot send), so instructions.py does the sending.
#
#   cargo build --release --example bench
#   examples/bench/instructions.sh gcra batch      # batches of 16, every key declared
#   examples/bench/instructions.sh gcra one        # one decision per EVALSHA
#   examples/bench/instructions.sh gcra cell       # redis-cell's CL.THROTTLE, the same policy
set -euo pipefail
exec python3 "$(dirname "$0")/instructions.py" "$@"
