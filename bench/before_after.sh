#!/usr/bin/env bash
# Before/after benchmark of a refactor: two ds4-bench binaries (e.g. a build of the commit
# before the change and the current build) on the same GGUF and prompt, alternating which runs
# first in each repetition so machine-speed swings hit both. Prints a markdown table of the
# medians and the paired ratio (median of the per-repetition after/before ratios), with a
# memory-bandwidth probe before each repetition and the decode rate's share of it.
#
#   bench/before_after.sh --before DIR --after DIR [--model FILE] [--ctx N] [--reps N]
#                         [--gen-tokens N] [--threads N] [--batch N] [--sessions N]
#
# DIR is a build directory holding bin/ds4-bench (the "after" one also bin/membw_probe and
# bin/decode_bytes). To build the "before" side:
#   git worktree add --detach /tmp/before REV && cmake -S /tmp/before -B /tmp/before/build \
#       -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS4_TESTS=OFF && ninja -C /tmp/before/build ds4-bench
# The model defaults to models/flash4.gguf (bench/side_by_side.sh writes it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model="$root/models/flash4.gguf"
before="" after="$root/build"
ctx=512 reps=5 gen=32 threads=2 batch=2048 sessions=1
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --before) before="$2"; shift ;;
    --after) after="$2"; shift ;;
    --model) model="$2"; shift ;;
    --ctx) ctx="$2"; shift ;;
    --reps) reps="$2"; shift ;;
    --gen-tokens) gen="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --batch) batch="$2"; shift ;;
    --sessions) sessions="$2"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "before_after.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
[[ -n $before ]] || { echo "before_after.sh: --before DIR is required" >&2; exit 2; }
for exe in "$before/bin/ds4-bench" "$after/bin/ds4-bench" "$after/bin/membw_probe" "$after/bin/decode_bytes"; do
  [[ -x $exe ]] || { echo "before_after.sh: $exe is not available: build it" >&2; exit 1; }
done
[[ -f $model ]] || { echo "before_after.sh: $model is missing (bench/side_by_side.sh writes it)" >&2; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$after/bin/decode_bytes" "$model" --ctx "$ctx" > "$out/decode_bytes.txt"
n_vocab=$(awk '$1 == "n_vocab" { print $2 }' "$out/decode_bytes.txt")
step_mb=$(awk '$1 == "bytes_per_token_at" && $2 == "'"$ctx"'" { print $3 / 1e6 }' "$out/decode_bytes.txt")
awk -v n="$ctx" -v v="$n_vocab" 'BEGIN { srand(1); for (i = 0; i < n; i++) printf "%d ", int(rand() * v); print "" }' \
  > "$out/ids.txt"

run_one() {  # side rep
  local side=$1 rep=$2 dir
  [[ $side == before ]] && dir=$before || dir=$after
  "$dir/bin/ds4-bench" -m "$model" --token-ids "$out/ids.txt" --ctx-start "$ctx" --ctx-max "$ctx" \
      --gen-tokens "$gen" --threads "$threads" --prefill-chunk "$batch" --no-mmap --sessions "$sessions" \
      --warmup $((ctx < batch ? ctx : batch)) --csv "$out/$side-r$rep.csv" > "$out/$side-r$rep.log" 2>&1 || {
    echo "before_after.sh: $side failed:" >&2; tail -5 "$out/$side-r$rep.log" >&2; exit 1; }
}

for ((r = 1; r <= reps; r++)); do
  "$after/bin/membw_probe" --mib 1024 --threads "$threads" --reps 3 > "$out/probe-r$r.txt" 2>&1 || true
  echo "   rep $r/$reps" >&2
  if ((r % 2)); then run_one before "$r"; run_one after "$r"; else run_one after "$r"; run_one before "$r"; fi
done

python3 - "$out" "$reps" "$ctx" "${step_mb:-0}" "$sessions" <<'PY'
import csv, statistics, sys, re, pathlib
out, reps, ctx, step_mb = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4] or 0)
sessions = int(sys.argv[5])
def row(side, r):
    with open(out / f"{side}-r{r}.csv") as f:
        rows = list(csv.DictReader(f))
    return float(rows[-1]["prefill_tps"]), float(rows[-1]["gen_tps"])
probes = []
for r in range(1, reps + 1):
    m = re.search(r"median ([0-9.]+) GB/s", (out / f"probe-r{r}.txt").read_text())
    probes.append(float(m.group(1)) if m else float("nan"))
b = [row("before", r) for r in range(1, reps + 1)]
a = [row("after", r) for r in range(1, reps + 1)]
med = statistics.median
print(f"| ctx {ctx} | before | after | after/before | paired |")
print("|---|---|---|---|---|")
for i, name in ((0, "prefill t/s"), (1, "decode t/s")):
    bb, aa = [x[i] for x in b], [x[i] for x in a]
    paired = med([y / x for x, y in zip(bb, aa)])
    print(f"| {name} | {med(bb):.2f} ({min(bb):.2f}-{max(bb):.2f}) | {med(aa):.2f} ({min(aa):.2f}-{max(aa):.2f}) "
          f"| {med(aa) / med(bb):.3f} | {paired:.3f} |")
if step_mb > 0:
    bw = med(probes)
    # With N sessions a step reads the weights once for all of them (and the union of their
    # experts): steps/s x one token's bytes is a lower bound of what a step reads.
    for side, xs in (("before", b), ("after", a)):
        gbs = med([x[1] for x in xs]) / sessions * step_mb / 1000
        at_least = "at least " if sessions > 1 else ""
        print(f"\n{side}: decode reads {at_least}{gbs:.1f} GB/s = {100 * gbs / bw:.0f}% of the probed {bw:.1f} GB/s", end="")
    print()
print(f"\nbandwidth probe per repetition (GB/s): {', '.join(f'{p:.1f}' for p in probes)}")
PY
