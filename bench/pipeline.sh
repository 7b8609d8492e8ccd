#!/usr/bin/env bash
# Pipeline benchmark (docs/PERFORMANCE.md, "Pipeline over TCP"): one process against a
# coordinator + workers on this machine (loopback), printing markdown tables.
#
#   bench/pipeline.sh [--model FILE] [--build DIR] [--threads N] [--latencies "0 1 20 80"]
#                     [--gen-tokens N] [--decode-ctx N] [--prompt-tokens N]
#                     [--dist-chunks "0 256 512"] [--timeout SEC] [--jobs N] [--out DIR]
#                     [--no-build]
#
# 1. Decode: ds4-bench's greedy probe of --gen-tokens tokens after a --decode-ctx-token prompt
#    (default 32 after 512), --threads per process (default 2), in one process, then in 2 and 3
#    processes (the model's layers split evenly: coordinator 0:K, workers ..., the last to
#    `output`) with each added one-way latency of --latencies (ms) on every data connection.
#    The latency comes from bench/delay_relay.py: a worker listens on 127.0.0.3:P, a relay on
#    127.0.0.1:P forwards to it with the delay in each direction, and since the coordinator
#    routes to the host its control connection came from (127.0.0.1) and the announced port P,
#    every hop (coordinator -> worker 1, worker 1 -> worker 2) and every answer goes through a
#    relay. Latency 0 = direct loopback, no relay (the relay's own cost shows in the 1 ms rows).
#    Overhead per hop = (pipeline ms/token - one process ms/token) / hops; the coordinator's
#    --debug telemetry of the decode tokens (one-token WORKs) is averaged per hop.
# 2. Prefill: a --prompt-tokens prompt (default 4096), one thread per process, one process
#    against coordinator + one worker, for each --dist-prefill-chunk of --dist-chunks (0: the
#    whole prompt in one WORK, no pipelining). Every run uses --prefill-chunk = the prompt, so
#    the pipeline sees the whole prompt in one call, and prefills it once untimed first
#    (--warmup: the first prefill of a process also faults in its scratch memory).
#
# Every process runs under `timeout` (--timeout, default 1800 s) and is killed on exit.
# --no-build: use the binaries in --build as they are. Results and logs go to --out (default
# build/pipeline_bench/DATE). The model defaults to models/flash4.gguf (bench/side_by_side.sh
# writes it); try the script on a small one: `ds4-gguf-gen --preset tiny -o /tmp/tiny.gguf`.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
model="$root/models/flash4.gguf"
build="$root/build"
threads=2
latencies="0 1 20 80"
gen=32
decode_ctx=512
prompt=4096
chunks="0 256 512"
limit=1800
jobs=2
build_first=1
out=""

usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="$2"; shift ;;
    --build) build="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --latencies) latencies="$2"; shift ;;
    --gen-tokens) gen="$2"; shift ;;
    --decode-ctx) decode_ctx="$2"; shift ;;
    --prompt-tokens) prompt="$2"; shift ;;
    --dist-chunks) chunks="$2"; shift ;;
    --timeout) limit="$2"; shift ;;
    --jobs) jobs="$2"; shift ;;
    --out) out="$2"; shift ;;
    --no-build) build_first=0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "pipeline.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for v in "$threads" "$gen" "$decode_ctx" "$prompt" "$limit" "$jobs"; do
  [[ "$v" =~ ^[0-9]+$ && "$v" -gt 0 ]] || { echo "pipeline.sh: '$v' is not a positive integer" >&2; exit 2; }
done
for v in $latencies; do
  [[ "$v" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "pipeline.sh: latency '$v' is not a number of ms" >&2; exit 2; }
done
for v in $chunks; do
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "pipeline.sh: --dist-chunks '$v' is not a number" >&2; exit 2; }
done
[[ -n "$latencies" && -n "$chunks" ]] || { echo "pipeline.sh: --latencies and --dist-chunks need values" >&2; exit 2; }
[[ -f "$model" ]] || { echo "pipeline.sh: no model $model (--model FILE)" >&2; exit 1; }
out=${out:-"$build/pipeline_bench/$(date +%Y%m%d-%H%M%S)"}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin="$build/bin"

if [[ $build_first == 1 ]]; then
  echo "== build (Release, $build)" >&2
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$build" -j "$jobs" ds4 ds4-bench >&2
fi
for exe in ds4 ds4-bench; do
  [[ -x "$bin/$exe" ]] || { echo "pipeline.sh: $bin/$exe is missing: build it" >&2; exit 1; }
done

# Every background process (workers, relays) is recorded here and killed on exit.
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The model's shape from its metadata.
"$bin/ds4" --inspect "$model" > "$out/inspect.txt"
n_layers=$(awk '$1 ~ /\.block_count$/ { print $3; exit }' "$out/inspect.txt")
n_vocab=$(awk '$1 ~ /\.vocab_size$/ { print $3; exit }' "$out/inspect.txt")
if [[ -z "$n_vocab" ]]; then
  n_vocab=$(awk '$1 == "tokenizer.ggml.tokens" { if (match($2, /\[[0-9]+\]/)) print substr($2, RSTART + 1, RLENGTH - 2); exit }' "$out/inspect.txt")
fi
[[ "$n_layers" =~ ^[0-9]+$ && "$n_layers" -ge 3 ]] || { echo "pipeline.sh: cannot read 3 or more layers from $model (got '$n_layers')" >&2; exit 1; }
[[ "$n_vocab" =~ ^[0-9]+$ && "$n_vocab" -gt 0 ]] || { echo "pipeline.sh: cannot read the vocabulary size of $model" >&2; exit 1; }
max_ids=$(( prompt > decode_ctx ? prompt : decode_ctx ))
# A fixed pseudo-random token sequence (the same for every run).
awk -v n="$max_ids" -v v="$n_vocab" 'BEGIN { srand(1); for (i = 0; i < n; i++) printf "%d ", int(rand() * v); print "" }' \
  > "$out/ids.txt"

# ranges N: the N inclusive layer ranges of an even split, e.g. "0:1 2:output" (the last one
# holds the output head).
ranges() {
  local n=$1 i b e r=""
  for ((i = 0; i < n; i++)); do
    b=$(( i * n_layers / n )); e=$(( (i + 1) * n_layers / n - 1 ))
    (( i == n - 1 )) && r+="$b:output" || r+="$b:$e "
  done
  echo "$r"
}

# run_bench NAME NPROC LATENCY_MS THREADS BENCH_ARGS...: ds4-bench alone (NPROC 1) or as the
# coordinator of NPROC-1 workers; logs and CSV under $out/NAME.*.
run_bench() {
  local name=$1 nproc=$2 lat=$3 t=$4; shift 4
  local args=(-m "$model" -t "$t" --token-ids "$out/ids.txt" --csv "$out/$name.csv" "$@")
  echo "   $name" >&2
  if (( nproc > 1 )); then
    local rs=($(ranges "$nproc")) cport i port host
    cport=$(free_port)
    for ((i = 1; i < nproc; i++)); do
      port=$(free_port); host=127.0.0.1
      if [[ $lat != 0 ]]; then
        host=127.0.0.3
        rm -f "$out/$name.relay$i.ready"
        timeout -k 10 "$limit" python3 "$root/bench/delay_relay.py" --listen 127.0.0.1 "$port" \
          --target "$host" "$port" --delay-ms "$lat" --ready "$out/$name.relay$i.ready" \
          > "$out/$name.relay$i.log" 2>&1 &
        pids+=($!)
        local k=0
        while [[ ! -s "$out/$name.relay$i.ready" ]] && (( k++ < 100 )); do sleep 0.1; done
        [[ -s "$out/$name.relay$i.ready" ]] || { echo "pipeline.sh: relay $i did not start, see $out/$name.relay$i.log" >&2; exit 1; }
      fi
      timeout -k 10 "$limit" "$bin/ds4" -m "$model" -t "$t" --role worker --layers "${rs[i]}" \
        --coordinator 127.0.0.1 "$cport" --listen "$host" "$port" > "$out/$name.w$i.log" 2>&1 &
      pids+=($!)
    done
    args+=(--role coordinator --layers "${rs[0]}" --listen 127.0.0.1 "$cport" --dist-route-timeout 120 --debug)
  fi
  # In the background and waited for, so that a signal to this script ends it at once.
  timeout -k 10 "$limit" "$bin/ds4-bench" "${args[@]}" > "$out/$name.log" 2> "$out/$name.err" &
  local fg=$!
  pids+=($fg)
  if ! wait "$fg"; then
    echo "pipeline.sh: $name failed, see $out/$name.err:" >&2
    tail -5 "$out/$name.err" >&2
    for f in "$out/$name".w*.log; do [[ -f $f ]] && { echo "-- $f" >&2; tail -3 "$f" >&2; }; done
    exit 1
  fi
  echo "$name $nproc $lat ${rs[*]:-0:output}" >> "$out/runs.txt"
  cleanup
}

: > "$out/runs.txt"
echo "== decode: $gen tokens after $decode_ctx, $threads thread(s) per process; latencies: $latencies ms" >&2
dec=(--ctx-start "$decode_ctx" --ctx-max "$decode_ctx" --gen-tokens "$gen" --warmup "$decode_ctx")
run_bench decode-p1 1 0 "$threads" "${dec[@]}"
for np in 2 3; do
  for lat in $latencies; do run_bench "decode-p$np-l$lat" "$np" "$lat" "$threads" "${dec[@]}"; done
done
echo "== prefill: $prompt tokens, 1 thread per process; --dist-prefill-chunk: $chunks" >&2
pre=(--ctx-start "$prompt" --ctx-max "$prompt" --gen-tokens 0 --prefill-chunk "$prompt" --warmup "$prompt")
run_bench prefill-p1 1 0 1 "${pre[@]}"
for c in $chunks; do run_bench "prefill-p2-c$c" 2 0 1 "${pre[@]}" --dist-prefill-chunk "$c"; done

python3 - "$out" "$model" "$threads" "$gen" "$decode_ctx" "$prompt" "$n_layers" > "$out/summary.md" <<'EOF'
import csv, re, statistics, sys
out, model, threads, gen, dctx, prompt, n_layers = sys.argv[1:8]

def row(name):
    with open(f"{out}/{name}.csv") as f:
        return list(csv.DictReader(f))[-1]

runs = {}
for line in open(f"{out}/runs.txt"):
    name, nproc, lat, *layers = line.split()
    runs[name] = (int(nproc), lat, " ".join(layers))

# Telemetry of the one-token WORKs (the decode probe): round trip, then one line per hop.
RT = re.compile(r"ds4: dist: pos \d+ n (\d+): round trip (\d+) us")
HOP = re.compile(r"ds4: dist:   hop (\d+) layers \S+ pos \d+ n (\d+): eval (\d+) us, downstream wait (\d+) us, "
                 r"forward send (\d+) us")
def telemetry(name):
    rts, hops, cur = [], {}, False
    for line in open(f"{out}/{name}.err"):
        m = RT.search(line)
        if m:
            cur = m.group(1) == "1"
            if cur: rts.append(int(m.group(2)))
            continue
        m = HOP.search(line)
        if m and cur:
            hops.setdefault(int(m.group(1)), []).append([int(x) for x in m.group(3, 4, 5)])
    return rts, hops

ms = lambda us: f"{us / 1000:.2f}"
print(f"Model {model} ({n_layers} layers), loopback.\n")
print(f"Decode: greedy probe of {gen} tokens after a {dctx}-token prompt, {threads} thread(s) per process.\n")
print("| processes | layers | added latency (one way) | decode t/s | ms/token | overhead per hop (ms) "
      "| beyond 2 x latency (ms) | round trip (ms) | per worker: eval / downstream wait / send (ms) |")
print("|---|---|---|---|---|---|---|---|---|")
single = float(row("decode-p1")["gen_tps"])
single_ms = 1000 / single if single > 0 else float("nan")
print(f"| 1 | all | - | {single:.2f} | {single_ms:.2f} | - | - | - | - |")
for name, (nproc, lat, layers) in runs.items():
    if not name.startswith("decode-p") or nproc == 1:
        continue
    tps = float(row(name)["gen_tps"])
    mpt = 1000 / tps if tps > 0 else float("nan")
    rts, hops = telemetry(name)
    rt = ms(statistics.mean(rts)) if rts else "n/a"
    per = "; ".join(f"w{h + 1}: " + " / ".join(ms(statistics.mean(v[i] for v in vals)) for i in range(3))
                    for h, vals in sorted(hops.items())) or "n/a"
    lat_s = "none (direct)" if lat == "0" else f"{lat} ms"
    hop = (mpt - single_ms) / (nproc - 1)
    print(f"| {nproc} | {layers} | {lat_s} | {tps:.2f} | {mpt:.2f} | {hop:.2f} | {hop - 2 * float(lat):.2f} "
          f"| {rt} | {per} |")
print()
print(f"Prefill: a {prompt}-token prompt, 1 thread per process, one call of the whole prompt.\n")
print("| processes | layers | --dist-prefill-chunk | prefill t/s | x one process |")
print("|---|---|---|---|---|")
base = float(row("prefill-p1")["prefill_tps"])
print(f"| 1 | all | - | {base:.2f} | 1.00 |")
for name, (nproc, lat, layers) in runs.items():
    if not name.startswith("prefill-p2"):
        continue
    c = name.rsplit("-c", 1)[1]
    tps = float(row(name)["prefill_tps"])
    print(f"| {nproc} | {layers} | {c}{' (one WORK)' if c == '0' else ''} | {tps:.2f} | {tps / base:.2f} |")
EOF
echo "== results in $out" >&2
cat "$out/summary.md"
