#!/usr/bin/env bash
# Time to first token of an agent's next turn (a ~4096-token prompt that extends the previous
# turn) in three cases (docs/PERFORMANCE.md "Disk KV cache"):
#   cold     a fresh server without a cache computes the whole prompt;
#   warm     the server that answered the previous turn still holds it in its slot;
#   restart  a server restarted after answering the previous turn loads it from --kv-disk-dir.
#   bench/server_ttft.sh [--bin build/bin] [-m MODEL] [--words 1500] [--threads N] [--reps 3] [--ctx 8192]
# The model defaults to models/flash4-rv.gguf (see bench/server_parallel.sh). Prints CSV.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/build/bin" model="$root/models/flash4-rv.gguf" words=1500 threads=$(nproc) reps=3 ctx=8192
while (($#)); do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    -m) model=$2; shift 2 ;;
    --words) words=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --ctx) ctx=$2; shift 2 ;;
    *) echo "server_ttft: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -f "$model" ] || { echo "server_ttft: $model not found (bench/server_parallel.sh writes it)" >&2; exit 1; }
work=$(mktemp -d)
server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  server_pid=""
}
trap 'stop_server; rm -rf "$work"' EXIT
start_server() {  # extra args...
  "$bin/ds4-server" -m "$model" --port 0 --ctx "$ctx" -t "$threads" --no-mmap "$@" 2>"$work/server.log" &
  server_pid=$!
  url=""
  for _ in $(seq 1200); do
    url=$(grep -ao 'http://[0-9.]*:[0-9]*' "$work/server.log" | head -1 || true)
    [ -n "$url" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$url" ] || { echo "server_ttft: ds4-server did not start" >&2; exit 1; }
}
turn() { node "$root/bench/ttft.mjs" "$url" --words "$words" --turn "$1" --state "$work/reply.txt"; }
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }
echo "rep,case,ttft_ms,prompt_tokens,cached_tokens"
for rep in $(seq "$reps"); do
  rm -rf "$work/kv"
  # The previous turn, then a clean stop: its conversation is checkpointed on disk.
  start_server --kv-disk-dir "$work/kv"
  r=$(turn 1)
  echo "$rep,first_turn_cold,$(field "$r" ttft_ms),$(field "$r" prompt_tokens),$(field "$r" cached_tokens)"
  stop_server
  start_server --kv-disk-dir "$work/kv"
  r=$(turn 2)
  echo "$rep,restart,$(field "$r" ttft_ms),$(field "$r" prompt_tokens),$(field "$r" cached_tokens)"
  stop_server
  start_server
  r=$(turn 2)
  echo "$rep,cold,$(field "$r" ttft_ms),$(field "$r" prompt_tokens),$(field "$r" cached_tokens)"
  stop_server
  start_server
  turn 1 >/dev/null
  r=$(turn 2)
  echo "$rep,warm,$(field "$r" ttft_ms),$(field "$r" prompt_tokens),$(field "$r" cached_tokens)"
  stop_server
done
