#!/usr/bin/env bash
# Aggregate decode throughput of several sequences decoding together (ds4-bench --sessions N:
# one batched call per step, each weight read once per step for all of them) on the 4-layer
# Flash-shaped q2 file, against the ceiling a memory-bound step allows. Prints a markdown table
# (docs/PERFORMANCE.md, "Several sequences").
#
#   bench/sessions.sh [--model FILE] [--build DIR] [--threads N] [--reps N] [--gen-tokens N]
#                     [--sessions "1 2 4 8"] [--ctx "512 4096"] [--out DIR]
#
# Each repetition runs every session count once, in order, at each context (one process per
# run: load, untimed warm-up prefill, the prefill to the context, then the probe). The table
# shows the median aggregate t/s, its ratio to one session, and the memory-bound ceiling of
# that ratio: one step reads the non-routed weights once and each sequence's routed experts
# (distinct sequences choose different experts; decode_bytes counts both), so
# ceiling(N) = N * B / (B + (N - 1) * E) with B the bytes of one decode step and E its experts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model="$root/models/flash4.gguf"
build="$root/build"
threads=2
reps=3
gen=32
sessions="1 2 4 8"
ctxs="512 4096"
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="$2"; shift ;;
    --build) build="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --reps) reps="$2"; shift ;;
    --gen-tokens) gen="$2"; shift ;;
    --sessions) sessions="$2"; shift ;;
    --ctx) ctxs="$2"; shift ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "sessions.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
bin="$build/bin"
[[ -f $model ]] || { echo "sessions.sh: $model missing (bench/side_by_side.sh writes it)" >&2; exit 1; }
[[ -n $out ]] || out=$(mktemp -d)
mkdir -p "$out"
max_ctx=0
ctx_args=""
for c in $ctxs; do ((c > max_ctx)) && max_ctx=$c; ctx_args="$ctx_args --ctx $c"; done
"$bin/decode_bytes" "$model" $ctx_args > "$out/decode_bytes.txt"
n_vocab=$(awk '$1 == "n_vocab" { print $2 }' "$out/decode_bytes.txt")
awk -v n="$max_ctx" -v v="$n_vocab" 'BEGIN { srand(1); for (i = 0; i < n; i++) printf "%d ", int(rand() * v); print "" }' \
  > "$out/ids.txt"
for ((r = 1; r <= reps; r++)); do
  for c in $ctxs; do
    for n in $sessions; do
      echo "   rep $r ctx $c sessions $n" >&2
      "$bin/ds4-bench" -m "$model" --token-ids "$out/ids.txt" --ctx-start "$c" --ctx-max "$c" \
        --gen-tokens "$gen" --threads "$threads" --no-mmap --prefill-chunk 2048 \
        --warmup $((c < 2048 ? c : 2048)) --sessions "$n" --csv "$out/s$n-c$c-r$r.csv" > "$out/s$n-c$c-r$r.log" 2>&1
    done
  done
done
python3 - "$out" "$reps" "$threads" "$gen" "$sessions" "$ctxs" <<'PY'
import csv, re, statistics, sys
out, reps, threads, gen = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sessions = [int(s) for s in sys.argv[5].split()]
ctxs = [int(c) for c in sys.argv[6].split()]
db = open(f"{out}/decode_bytes.txt").read()
experts = float(re.search(r"routed experts used\s+([\d.]+) MiB", db).group(1)) * 2**20
per_ctx = {int(c): float(b) for c, b in re.findall(r"bytes_per_token_at (\d+) (\d+)", db)}
def tps(n, c):
    v = []
    for r in range(1, reps + 1):
        with open(f"{out}/s{n}-c{c}-r{r}.csv") as f:
            v += [float(row["gen_tps"]) for row in csv.DictReader(f)]
    return v
print(f"{threads} thread(s), decode probe of {gen} tokens per sequence, median of {reps} runs (range).\n")
print("| context | sequences | aggregate decode t/s | x one sequence | memory-bound ceiling | share of ceiling |")
print("|---|---|---|---|---|---|")
for c in ctxs:
    base = statistics.median(tps(sessions[0], c))
    B = per_ctx[c]
    for n in sessions:
        v = tps(n, c)
        m = statistics.median(v)
        ceil = n * B / (B + (n - 1) * experts)
        print(f"| {c} | {n} | {m:.1f} ({min(v):.1f}-{max(v):.1f}) | {m / base:.2f} | {ceil:.2f} | {m / base / ceil:.0%} |")
print(f"\nOne decode step reads {per_ctx[ctxs[0]] / 1e6:.0f} MB at context {ctxs[0]}, of which routed experts "
      f"{experts / 1e6:.0f} MB per sequence (decode_bytes).")
PY
