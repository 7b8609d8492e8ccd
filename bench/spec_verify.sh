#!/usr/bin/env bash
# The cost of speculative verification on the 4-layer Flash-shaped q2 file (ds4-bench
# --spec-aid: drafts of the known greedy continuation, each right with the chosen chance, checked
# to decode exactly the plain probe's tokens). Prints markdown tables (docs/PERFORMANCE.md,
# "Speculative verification").
#
#   bench/spec_verify.sh [--model FILE] [--build DIR] [--threads N] [--reps N] [--gen-tokens N]
#                        [--ctx N] [--depths 1,2,...] [--accept 1,0.5,0] [--backoff] [--out DIR]
#                        [--no-run]
#
# Each repetition probes the memory bandwidth (membw_probe, 3 reps), then runs one ds4-bench
# process: load, untimed warm-up prefill, the prefill to --ctx, the untimed greedy
# continuation, the plain probe, then one probe per depth and acceptance. Tables: the medians
# over the repetitions of t/s relative to the plain probe of the same process (x plain), tokens
# and rows per step; and from the probes that accept nothing (one token per step) the cost of a
# step of k rows against a one-row step, in wall and in CPU time. On a shared VM other processes
# take the cores for whole seconds: the CPU-time ratios (the process's own work) are the steadier
# estimate there. --backoff: the verified probes use the generator's draft back-off
# (ds4-bench --spec-aid-backoff). --no-run: only the tables, from the files already in --out.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model="$root/models/flash4.gguf"
build="$root/build"
threads=2
reps=3
gen=32
ctx=512
depths="1,2,3,4,5,6,7,8"
accept="1,0.5,0"
out=""
run=1
backoff=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="$2"; shift ;;
    --build) build="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --reps) reps="$2"; shift ;;
    --gen-tokens) gen="$2"; shift ;;
    --ctx) ctx="$2"; shift ;;
    --depths) depths="$2"; shift ;;
    --accept) accept="$2"; shift ;;
    --backoff) backoff=(--spec-aid-backoff) ;;
    --out) out="$2"; shift ;;
    --no-run) run=0 ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "spec_verify.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
bin="$build/bin"
[[ $run == 0 && -z $out ]] && { echo "spec_verify.sh: --no-run needs --out DIR" >&2; exit 2; }
[[ $run == 0 || -f $model ]] || { echo "spec_verify.sh: $model missing (bench/side_by_side.sh writes it)" >&2; exit 1; }
[[ -n $out ]] || out=$(mktemp -d)
mkdir -p "$out"
if [[ $run == 1 ]]; then
"$bin/decode_bytes" "$model" --ctx "$ctx" > "$out/decode_bytes.txt"
n_vocab=$(awk '$1 == "n_vocab" { print $2 }' "$out/decode_bytes.txt")
awk -v n="$ctx" -v v="$n_vocab" 'BEGIN { srand(1); for (i = 0; i < n; i++) printf "%d ", int(rand() * v); print "" }' \
  > "$out/ids.txt"
for ((r = 1; r <= reps; r++)); do
  echo "   rep $r" >&2
  "$bin/membw_probe" --mib 1024 --threads "$threads" --reps 3 > "$out/probe-r$r.txt" 2>&1 || true
  "$bin/ds4-bench" -m "$model" --token-ids "$out/ids.txt" --ctx-start "$ctx" --ctx-max "$ctx" \
    --gen-tokens "$gen" --threads "$threads" --no-mmap --prefill-chunk 2048 \
    --warmup $((ctx < 2048 ? ctx : 2048)) --spec-aid "$depths" --spec-aid-accept "$accept" \
    "${backoff[@]}" --csv "$out/r$r.csv" > "$out/r$r.log" 2>&1 || { cat "$out/r$r.log" >&2; exit 1; }
done
fi
python3 - "$out" "$reps" "$threads" "$gen" "$ctx" <<'PY'
import csv, re, statistics as st, sys
out, reps, threads, gen, ctx = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
db = open(f"{out}/decode_bytes.txt").read()
step_bytes = float(re.search(rf"bytes_per_token_at {ctx} (\d+)", db).group(1))
probes = []
for r in range(1, reps + 1):
    m = re.search(r"median ([\d.]+) GB/s", open(f"{out}/probe-r{r}.txt").read())
    probes.append(float(m.group(1)) if m else float("nan"))
rows = {}
for r in range(1, reps + 1):
    with open(f"{out}/r{r}.csv") as f:
        for row in csv.DictReader(f):
            rows.setdefault((int(row["draft_max"]), float(row["aid_accept"])), []).append(row)
def med(key, rs): return st.median(float(x[key]) for x in rs)
plain = rows.pop((0, 0.0))
ptps = [float(x["gen_tps"]) for x in plain]
print(f"{threads} thread(s), context {ctx}, probes of {gen} tokens, median of {reps} processes (range).")
print(f"Plain decode {st.median(ptps):.2f} t/s ({min(ptps):.2f}-{max(ptps):.2f}), "
      f"{med('ms_per_step', plain):.1f} ms per step, {med('cpu_ms_per_step', plain):.1f} CPU ms; "
      f"{step_bytes / 1e6:.0f} MB per step = {st.median(ptps) * step_bytes / 1e9:.1f} GB/s against probes of "
      + ", ".join(f"{p:.1f}" for p in probes) + " GB/s.\n")
def cpu(r): return float(r["cpu_ms_per_step"]) * int(r["steps"])  # CPU ms of the whole probe
print("| drafts | aid accept | acceptance | tokens / step | rows / step | t/s | x plain (wall) | x plain (CPU) |")
print("|---|---|---|---|---|---|---|---|")
for (d, a) in sorted(rows, key=lambda k: (k[0], -k[1])):
    rs = rows[(d, a)]
    x = [float(r["x_plain"]) for r in rs]
    xc = [cpu(p) / cpu(r) for r, p in zip(rs, plain)]
    print(f"| {d} | {a:g} | {med('acceptance', rs):.0%} | {med('tokens_per_step', rs):.2f} | "
          f"{med('rows_per_step', rs):.2f} | {med('gen_tps', rs):.2f} | {st.median(x):.2f} "
          f"({min(x):.2f}-{max(x):.2f}) | **{st.median(xc):.2f}** ({min(xc):.2f}-{max(xc):.2f}) |")
zero = sorted((d, rs) for (d, a), rs in rows.items() if a == 0)
if zero:
    print("\nA step of k rows against a one-row step (the probes that accept nothing: one token per step):\n")
    print("| drafts | rows / step (k) | wall ms / step | CPU ms / step | x one row (wall) | x one row (CPU) |")
    print("|---|---|---|---|---|---|")
    print(f"| 0 | 1.00 | {med('ms_per_step', plain):.1f} | {med('cpu_ms_per_step', plain):.1f} | 1.00 | 1.00 |")
    for d, rs in zero:
        wall = [float(r["ms_per_step"]) / float(p["ms_per_step"]) for r, p in zip(rs, plain)]
        cpu_x = [float(r["cpu_ms_per_step"]) / float(p["cpu_ms_per_step"]) for r, p in zip(rs, plain)]
        print(f"| {d} | {med('rows_per_step', rs):.2f} | {med('ms_per_step', rs):.1f} | "
              f"{med('cpu_ms_per_step', rs):.1f} | {st.median(wall):.2f} ({min(wall):.2f}-{max(wall):.2f}) | "
              f"**{st.median(cpu_x):.2f}** ({min(cpu_x):.2f}-{max(cpu_x):.2f}) |")
PY
