#!/usr/bin/env bash
# Load test of ds4-server (docs/SERVER.md): starts the server on a free port (the tiny
# generated model unless -m is given), samples its RSS from /proc before and after a warm-up
# and at the end, and runs bench/server_load.mjs (N concurrent streaming clients for S s).
# With --haproxy: three replicas sharing a --kv-disk-dir behind deploy/haproxy/haproxy.cfg
# (docs/DEPLOY.md), the clients talking to HAProxy; RSS and metrics are the first replica's,
# and each replica's request count is printed.
#   bench/server_load.sh [--bin build/bin] [-m MODEL] [--clients 16] [--seconds 60]
#                        [--max-tokens 16] [--ctx 4096] [--threads 1] [--parallel 1] [--haproxy]
# Exits non-zero if any request failed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/build/bin" model="" clients=16 seconds=60 max_tokens=16 ctx=4096 threads=1 parallel=1 haproxy=0
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
    --haproxy) haproxy=1; shift ;;
    *) echo "server_load: unknown argument $1" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d)
server_pid="" pids=()
cleanup() {
  for p in $server_pid "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "$model" ]; then
  model="$work/tiny.gguf"
  "$bin/ds4-gguf-gen" -q --preset tiny --real-vocab --type embd=q8_0 --type output=q8_0 -o "$model"
fi
start_server() {  # LOG [extra flags...]: starts one server, sets $url and $server_pid
  local log=$1; shift
  "$bin/ds4-server" -m "$model" --ctx "$ctx" -t "$threads" --parallel "$parallel" "$@" 2>"$log" &
  server_pid=$!
  url=""
  for _ in $(seq 600); do
    url=$(grep -ao 'http://[0-9.]*:[0-9]*' "$log" | head -1 || true)
    [ -n "$url" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$url" ] || { echo "server_load: ds4-server did not start" >&2; exit 1; }
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
if ((haproxy)); then
  command -v haproxy >/dev/null || { echo "server_load: --haproxy needs haproxy (scripts/setup.sh)" >&2; exit 1; }
  replica_urls=()
  for i in 3 2 1; do  # the first replica last, so $server_pid and the RSS are r1's
    start_server "$work/r$i.log" --port "$(free_port)" --kv-disk-dir "$work/kv" --drain-timeout 30
    pids+=("$server_pid"); replica_urls[$i]=$url; export "DS4_R$i=${url#http://}"
  done
  export DS4_LISTEN="127.0.0.1:$(free_port)" DS4_HAPROXY_STATS="$work/haproxy.sock"
  haproxy -db -f "$root/deploy/haproxy/haproxy.cfg" >"$work/haproxy.log" 2>&1 &
  pids+=($!)
  url="http://$DS4_LISTEN"
  for _ in $(seq 100); do curl -sf "$url/health" >/dev/null && break; sleep 0.1; done
  sleep 2.5  # HAProxy's health checks (rise 2, every second) bring the replicas up
else
  start_server "$work/server.log" --port 0
fi
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
if ((haproxy)); then
  for i in 1 2 3; do
    echo "replica r$i: $(curl -s "${replica_urls[$i]}/metrics" | grep -E '^ds4_requests_total\{api="chat"\} ' || true)"
  done
  grep -c 'DOWN' "$work/haproxy.log" | sed 's/^/haproxy: replica DOWN events: /'
  url=${replica_urls[1]}
fi
curl -s "$url/metrics" | grep -E '^ds4_(requests_total|request_errors_total|generated_tokens_total|decode_tokens_per_second|queue_depth|queue_rejected_total|batch_steps_total|batch_sequences_total)' || true
exit "$status"
