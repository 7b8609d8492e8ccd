#!/usr/bin/env bash
# Aggregate generation speed of ds4-server with 1, 2, 4 and 8 concurrent streaming clients, each
# count on a fresh server with --parallel equal to it (docs/PERFORMANCE.md "Server slots").
# Every client sends the same shape of request (bench/server_load.mjs: a short system + user
# prompt, max_tokens tokens, no thinking) back to back for --seconds; the aggregate is the
# generated tokens the server counted (/metrics) over the wall time.
#   bench/server_parallel.sh [--bin build/bin] [-m MODEL] [--clients "1 2 4 8"] [--seconds 30]
#                            [--max-tokens 64] [--threads 2] [--ctx 4096] [--mmap]
#                            [--pipeline K] [--server-args "..."]
# --mmap: map the weights instead of reading them (--no-mmap, the default here); a sparse file
# (ds4-gguf-gen --fill) needs it. --pipeline K: ds4-server is a pipeline coordinator holding
# layers 0:K, with one `ds4 --role worker` holding K+1:output on loopback (docs/DISTRIBUTED.md),
# both with --threads. --server-args: more ds4-server flags (e.g. "--mixed-prefill-quantum 128").
# The model defaults to models/flash4-rv.gguf (git-ignored): the real Flash per-layer shape,
# 4 layers, q2 experts, with the real vocabulary (the server needs the tokenizer); written by
# ds4-gguf-gen when missing (8.9 GiB). Prints one CSV line per client count.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/build/bin" model="$root/models/flash4-rv.gguf" counts="1 2 4 8" seconds=30 max_tokens=64
threads=$(nproc) ctx=4096 mmap="--no-mmap" pipeline="" server_args=""
while (($#)); do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    -m) model=$2; shift 2 ;;
    --clients) counts=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --max-tokens) max_tokens=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --ctx) ctx=$2; shift 2 ;;
    --mmap) mmap=""; shift ;;
    --pipeline) pipeline=$2; shift 2 ;;
    --server-args) server_args=$2; shift 2 ;;
    *) echo "server_parallel: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  echo "server_parallel: writing $model (8.9 GiB)" >&2
  "$bin/ds4-gguf-gen" --preset flash --layers 4 --ratios 4,128,4,128 --real-vocab -o "$model" --threads "$threads" >&2
fi
work=$(mktemp -d)
server_pid="" worker_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  if [ -n "$worker_pid" ]; then kill "$worker_pid" 2>/dev/null || true; wait "$worker_pid" 2>/dev/null || true; fi
  server_pid="" worker_pid=""
}
trap 'stop_server; rm -rf "$work"' EXIT
metric() { curl -s "$url/metrics" | awk -v n="$1" '$1 == n {print $2}'; }
echo "clients,parallel,seconds,generated_tokens,aggregate_tps,requests_ok,requests_failed,mean_batch_sequences,p50_ms,p90_ms"
for n in $counts; do
  dist=()
  if [ -n "$pipeline" ]; then
    cport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # shellcheck disable=SC2086
    "$bin/ds4" -m "$model" -t "$threads" $mmap --ctx "$ctx" --role worker --layers "$((pipeline + 1)):output" \
      --coordinator 127.0.0.1 "$cport" --listen 127.0.0.1 0 2>"$work/worker.log" &
    worker_pid=$!
    dist=(--role coordinator --layers "0:$pipeline" --listen 127.0.0.1 "$cport")
  fi
  # shellcheck disable=SC2086
  "$bin/ds4-server" -m "$model" --port 0 --ctx "$ctx" -t "$threads" --parallel "$n" $mmap "${dist[@]}" $server_args \
    2>"$work/server.log" &
  server_pid=$!
  url=""
  for _ in $(seq 1200); do
    url=$(grep -ao 'http://[0-9.]*:[0-9]*' "$work/server.log" | head -1 || true)
    [ -n "$url" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$url" ] || { echo "server_parallel: ds4-server did not start" >&2; exit 1; }
  # Warm-up: every slot serves one request (page faults, allocator, scratch).
  node "$root/bench/server_load.mjs" "$url" --clients "$n" --seconds 1 --max-tokens 4 >/dev/null
  g0=$(metric ds4_generated_tokens_total) s0=$(metric ds4_batch_steps_total) q0=$(metric ds4_batch_sequences_total)
  t0=$(date +%s.%N)
  result=$(node "$root/bench/server_load.mjs" "$url" --clients "$n" --seconds "$seconds" --max-tokens "$max_tokens")
  t1=$(date +%s.%N)
  g1=$(metric ds4_generated_tokens_total) s1=$(metric ds4_batch_steps_total) q1=$(metric ds4_batch_sequences_total)
  stop_server
  python3 - "$n" "$t0" "$t1" "$g0" "$g1" "$s0" "$s1" "$q0" "$q1" "$result" <<'PY'
import json, sys
n, t0, t1, g0, g1, s0, s1, q0, q1 = sys.argv[1:10]
r = json.loads(sys.argv[10])
secs = float(t1) - float(t0)
gen = float(g1) - float(g0)
steps = float(s1) - float(s0)
print(f"{n},{n},{secs:.1f},{gen:.0f},{gen / secs:.2f},{r['ok']},{r['failed']},"
      f"{(float(q1) - float(q0)) / steps if steps else 0:.2f},{r['latency_ms']['p50']},{r['latency_ms']['p90']}")
PY
done
