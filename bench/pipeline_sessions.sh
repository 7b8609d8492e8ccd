#!/usr/bin/env bash
# Batched calls over a pipeline (docs/DISTRIBUTED.md "Batched calls", docs/PERFORMANCE.md
# "Pipeline over TCP"): ds4-bench --sessions N as a coordinator holding layers 0:K with one
# `ds4 --role worker` holding K+1:output on loopback, against one process, for each N. Prints
# one CSV line per run: the decode probe's aggregate t/s (ds4-bench --csv gen_tps: all the
# sessions' tokens over the wall time) and its ratio to --sessions 1 of the same setup.
#   bench/pipeline_sessions.sh -m MODEL [--bin build/bin] [--sessions "1 4"] [--split K]
#                              [--threads 1] [--ctx 64] [--gen-tokens 16] [--timeout 900]
# The token ids are fixed pseudo-random ones (seeded), so every run walks the same prompt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/build/bin" model="" sessions="1 4" split=1 threads=1 ctx=64 gen=16 limit=900
while (($#)); do
  case "$1" in
    -m) model=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --sessions) sessions=$2; shift 2 ;;
    --split) split=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --ctx) ctx=$2; shift 2 ;;
    --gen-tokens) gen=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    *) echo "pipeline_sessions: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$model" ] || { echo "pipeline_sessions: -m MODEL is required" >&2; exit 2; }
work=$(mktemp -d)
worker_pid=""
cleanup() {
  if [ -n "$worker_pid" ]; then kill "$worker_pid" 2>/dev/null || true; wait "$worker_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
python3 -c 'import random; random.seed(7); print(" ".join(str(random.randrange(1000, 100000)) for _ in range(4096)))' \
  >"$work/ids.txt"
bench=(--token-ids "$work/ids.txt" --ctx-start "$ctx" --ctx-max "$ctx" --gen-tokens "$gen" -t "$threads"
       --ctx-alloc $((ctx + gen + 8)))
# The aggregate decode t/s of one ds4-bench run (its CSV's gen_tps).
aggregate() { awk -F, 'NR == 2 {printf "%.2f", $5}' "$1"; }
echo "setup,sessions,aggregate_decode_tps,x_one_session"
for setup in one pipeline; do
  base=""
  for n in $sessions; do
    dist=()
    if [ "$setup" = pipeline ]; then
      port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
      timeout "$limit" "$bin/ds4" -m "$model" -t "$threads" --ctx $((ctx + gen + 64)) --role worker \
        --layers "$((split + 1)):output" --coordinator 127.0.0.1 "$port" --listen 127.0.0.1 0 2>"$work/worker.log" &
      worker_pid=$!
      dist=(--role coordinator --layers "0:$split" --listen 127.0.0.1 "$port")
    fi
    timeout "$limit" "$bin/ds4-bench" -m "$model" "${bench[@]}" --sessions "$n" "${dist[@]}" --csv "$work/out.csv" \
      >"$work/bench.log" 2>&1 || { cat "$work/bench.log" "$work/worker.log" >&2 2>/dev/null; exit 1; }
    if [ -n "$worker_pid" ]; then kill "$worker_pid" 2>/dev/null || true; wait "$worker_pid" 2>/dev/null || true; fi
    worker_pid=""
    tps=$(aggregate "$work/out.csv")
    [ -n "$base" ] || base=$tps
    echo "$setup,$n,$tps,$(python3 -c "print(f'{$tps / $base:.2f}')")"
  done
done
