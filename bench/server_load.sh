#!/usr/bin/env bash
# Load test of ds4-server (docs/SERVER.md): starts the server on a free port (the tiny
# generated model unless -m is given), samples its RSS from /proc before and after a warm-up
# and at the end, and runs bench/server_load.mjs (N concurrent streaming clients for S s).
#   bench/server_load.sh [--bin build/bin] [-m MODEL] [--clients 16] [--seconds 60]
#                        [--max-tokens 16] [--ctx 4096] [--threads 1] [--parallel 1]
# Exits non-zero if any request failed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/build/bin" model="" clients=16 seconds=60 max_tokens=16 ctx=4096 threads=1 parallel=1
while (($#)); do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    -m) model=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --max-tokens) max_tokens=$2; shift 2 ;;
    --ctx) ctx=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    *) echo "server_load: unknown argument $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "$model" ]; then
  model="$work/tiny.gguf"
  "$bin/ds4-gguf-gen" -q --preset tiny --real-vocab --type embd=q8_0 --type output=q8_0 -o "$model"
fi
"$bin/ds4-server" -m "$model" --port 0 --ctx "$ctx" -t "$threads" --parallel "$parallel" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 600); do
  url=$(grep -ao 'http://[0-9.]*:[0-9]*' "$work/server.log" | head -1 || true)
  [ -n "$url" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "server_load: ds4-server did not start" >&2; exit 1; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$server_pid/status"; }
rss_start=$(rss)
# Warm-up: a few requests so the allocator and the session reach their steady size.
node "$root/bench/server_load.mjs" "$url" --clients 4 --seconds 2 --max-tokens "$max_tokens" >/dev/null
rss_warm=$(rss)
result=$(node "$root/bench/server_load.mjs" "$url" --clients "$clients" --seconds "$seconds" \
              --max-tokens "$max_tokens") && status=0 || status=$?
rss_end=$(rss)
echo "$result"
echo "{\"rss_kib\":{\"start\":$rss_start,\"after_warmup\":$rss_warm,\"end\":$rss_end}}"
curl -s "$url/metrics" | grep -E '^ds4_(requests_total|request_errors_total|generated_tokens_total|decode_tokens_per_second|queue_depth|queue_rejected_total|batch_steps_total|batch_sequences_total)' || true
exit "$status"
