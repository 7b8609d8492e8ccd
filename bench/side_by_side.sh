#!/usr/bin/env bash
# Side-by-side benchmark: DwarfStar (ds4-bench) against llama.cpp (ds4-peer-bench: the oracle's
# prebuilt libraries at their fastest CPU settings, F16 KV, flash attention auto, repack) on
# the same DeepSeek-V4-Flash-shaped GGUF, plus a memory read-bandwidth probe. Prints a
# markdown table (docs/PERFORMANCE.md, "Reproducing").
#
#   bench/side_by_side.sh [--quick] [--reps N] [--model FILE] [--glm] [--build DIR] [--threads N]
#                         [--gen-tokens N] [--batch N] [--jobs N] [--out DIR]
#                         [--no-build] [--probe-mib N]
#
# Measured: prefill t/s of a 512- and a 4096-token prompt (each its own single-frontier walk:
# --ctx-start = --ctx-max = N), and the greedy decode probe's t/s at those contexts. After a
# warm-up run of each engine, every repetition runs both engines back to back, alternating
# which goes first, so machine-speed swings hit both; the table shows medians (and ranges).
# Inside each run, both engines first prefill min(batch, N) tokens untimed (--warmup) and reset.
# The ratio column divides the medians; "paired" is the median of the per-repetition ratios
# (the two engines of one repetition ran back to back, in the same minute of the machine).
# Each repetition starts with a short bandwidth probe (3 reads), listed per repetition with
# the decode rows, beside the long probe at the end, which also states the int8 peak that the
# prefill rows are measured against (tools/ds4-bench/machine_limits.h: vpdpbusd per cycle x clock).
# Default 5 repetitions: on a shared VM one repetition in a slow minute is common, and the
# median of 5 stays put with up to two of them (with 3, one slow run can move it).
# --quick: 2 repetitions of the 512 case only (a smoke run of the whole pipeline).
# --batch N (default 2048): prompt tokens per batch for both engines (ds4 --prefill-chunk,
# llama.cpp n_batch = n_ubatch). 2048 is the fastest of 512-4096 for each on the 4096-token
# prompt here (2026-12-01: llama.cpp 75 / 85 / 86-91 / 81-84 t/s at 512 / 1024 / 2048 /
# 4096; ds4 178 / 189 / 194 / 191).
# --no-build: use the binaries already in --build (the smoke test does, from ctest);
# --probe-mib N: the bandwidth probe's buffer (default 1024; far beyond the caches).
#
# The model defaults to models/flash4.gguf (git-ignored): the real Flash per-layer shape, 4
# layers with compress ratios 4,128,4,128 and the published q2 recipe, written by
# ds4-gguf-gen if missing (8.9 GiB). --glm: models/glm3.gguf instead, GLM 5.2's per-layer shape
# (glm52 preset: q2_k/q4_k experts, q8_0 dense), 3 layers of which the first is dense (10.0 GiB).
# The oracle must be installed (scripts/setup.sh). Each run's process times (wall, user, sys:
# load, warm-up, prefill and decode) are kept in *.time and summed up per engine: on a shared
# machine the CPU seconds move less than the wall clock.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
model="$root/models/flash4.gguf"
build="$root/build"
threads=2
reps=5
gen=32
batch=2048
jobs=2
quick=0
build_first=1
probe_mib=1024
out=""
reps_given=0
glm=0
gen_given=0

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --reps) reps="$2"; reps_given=1; shift ;;
    --model) model="$2"; shift ;;
    --glm) glm=1 ;;
    --build) build="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --gen-tokens) gen="$2"; gen_given=1; shift ;;
    --batch) batch="$2"; shift ;;
    --jobs) jobs="$2"; shift ;;
    --out) out="$2"; shift ;;
    --no-build) build_first=0 ;;
    --probe-mib) probe_mib="$2"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "side_by_side.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ $glm == 1 && $model == "$root/models/flash4.gguf" ]] && model="$root/models/glm3.gguf"
cases="512 4096"
if [[ $quick == 1 ]]; then
  cases="512"
  [[ $reps_given == 1 ]] || reps=2
  [[ $gen_given == 1 ]] || gen=16
fi
for v in "$reps" "$threads" "$gen" "$batch" "$jobs" "$probe_mib"; do
  [[ "$v" =~ ^[0-9]+$ && "$v" -gt 0 ]] || { echo "side_by_side.sh: '$v' is not a positive integer" >&2; exit 2; }
done
out=${out:-"$build/side_by_side/$(date +%Y%m%d-%H%M%S)"}
mkdir -p "$out"
bin="$build/bin"

if [[ $build_first == 1 ]]; then
  echo "== build (Release, $build)" >&2
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$build" -j "$jobs" ds4-bench membw_probe decode_bytes ds4-gguf-gen >&2
  ninja -C "$build" -j "$jobs" ds4-peer-bench >&2 || true
fi
for exe in ds4-bench membw_probe decode_bytes ds4-gguf-gen ds4-peer-bench; do
  if [[ ! -x "$bin/$exe" ]]; then
    [[ $exe == ds4-peer-bench ]] && hint="install the llama.cpp oracle with scripts/setup.sh" || hint="build it"
    echo "side_by_side.sh: $bin/$exe is not available: $hint" >&2
    exit 1
  fi
done

if [[ ! -f "$model" ]]; then
  mkdir -p "$(dirname "$model")"
  avail_kib=$(df -Pk "$(dirname "$model")" | awk 'NR == 2 { print $4 }')
  if (( avail_kib < 10 * 1024 * 1024 )); then
    echo "side_by_side.sh: $model is missing and $(dirname "$model") has less than 10 GiB free to write it" >&2
    exit 1
  fi
  if [[ $glm == 1 ]]; then
    echo "== writing $model (3-layer GLM 5.2 shape, 1 dense, glm52 q2 recipe; 10.0 GiB)" >&2
    "$bin/ds4-gguf-gen" --arch glm-dsa --preset glm52 --layers 3 --dense-lead 1 --indexer-ln-eps 0 \
      -o "$model" --threads "$jobs" >&2
  else
    echo "== writing $model (4-layer Flash shape, ratios 4,128,4,128, q2 recipe; 8.9 GiB)" >&2
    "$bin/ds4-gguf-gen" --preset flash --layers 4 --ratios 4,128,4,128 -o "$model" --threads "$jobs" >&2
  fi
fi

ctx_args=""
for c in $cases; do ctx_args="$ctx_args --ctx $c"; done
"$bin/decode_bytes" "$model" $ctx_args > "$out/decode_bytes.txt"
n_vocab=$(awk '$1 == "n_vocab" { print $2 }' "$out/decode_bytes.txt")
max_ctx=${cases##* }
# A fixed pseudo-random token sequence (same for both engines, every run).
awk -v n="$max_ctx" -v v="$n_vocab" 'BEGIN { srand(1); for (i = 0; i < n; i++) printf "%d ", int(rand() * v); print "" }' \
  > "$out/ids.txt"

run_one() {  # engine case rep
  local engine=$1 ctx=$2 rep=$3 exe
  [[ $engine == ds4 ]] && exe="$bin/ds4-bench" || exe="$bin/ds4-peer-bench"
  local args=(-m "$model" --token-ids "$out/ids.txt" --ctx-start "$ctx" --ctx-max "$ctx"
              --gen-tokens "$gen" --threads "$threads" --csv "$out/$engine-$ctx-r$rep.csv")
  # Each engine at its fastest: the same prompt batch; ds4 reads the weights into huge-page
  # memory (--no-mmap: decode 1.10-1.13x faster than the huge-page mapping of the file, in one
  # process alternating over both copies, docs/PERFORMANCE.md "Weights in memory");
  # DS4_BENCH_MMAP=1 maps the file instead (see the eviction below). llama.cpp maps it (its
  # default; reading it was not faster and its load took 100 s instead of 40).
  [[ $engine == ds4 ]] && args+=(--prefill-chunk "$batch") || args+=(--batch "$batch")
  # Both engines first prefill one batch untimed (as llama-bench's warm-up run): in a fresh
  # process the first prefill also faults in the scratch memory, which on this VM costs ~2 s
  # per GB (docs/PERFORMANCE_JOURNAL.md, "The first prefill of a process").
  args+=(--warmup $((ctx < batch ? ctx : batch)))
  [[ $engine == ds4 && -z ${DS4_BENCH_MMAP:-} ]] && args+=(--no-mmap)
  echo "   $engine ctx $ctx rep $rep" >&2
  local timer=()
  [[ -x /usr/bin/time ]] && timer=(/usr/bin/time -o "$out/$engine-$ctx-r$rep.time" -f "%e %U %S")
  if ! "${timer[@]}" "$exe" "${args[@]}" > "$out/$engine-$ctx-r$rep.log" 2>&1; then
    echo "side_by_side.sh: $engine failed, see $out/$engine-$ctx-r$rep.log:" >&2
    tail -5 "$out/$engine-$ctx-r$rep.log" >&2
    exit 1
  fi
}

# With DS4_BENCH_MMAP=1, ds4 maps the weights at a 2 MiB-aligned address with MADV_HUGEPAGE: the page cache then
# reads the file in 2 MiB folios, each mapped with one TLB entry, but only for pages not
# cached yet (cached in small folios, they stay small). So the file leaves the page cache
# first (POSIX_FADV_DONTNEED, no privileges needed), and ds4's warm-up reads it back.
if [[ -n ${DS4_BENCH_MMAP:-} ]]; then
  python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$model"
fi
echo "== warm-up (page cache, then $reps repetitions, $threads threads, $gen decode tokens)" >&2
first=${cases%% *}
run_one ds4 "$first" 0
run_one llama "$first" 0
for ((r = 1; r <= reps; r++)); do
  # A short probe per repetition: the memory's speed moves within minutes on a shared VM,
  # and the decode rows of that repetition are compared with it.
  "$bin/membw_probe" --mib "$probe_mib" --threads "$threads" --reps 3 > "$out/membw-r$r.txt"
  for c in $cases; do
    if (( r % 2 )); then run_one ds4 "$c" "$r"; run_one llama "$c" "$r"
    else run_one llama "$c" "$r"; run_one ds4 "$c" "$r"; fi
  done
done

echo "== memory read bandwidth" >&2
"$bin/membw_probe" --mib "$probe_mib" --threads "$threads" --reps 9 --int8-peak | tee "$out/membw.txt" >&2

python3 - "$out" "$reps" "$threads" "$gen" "$cases" "$model" "$batch" > "$out/summary.md" <<'EOF'
import csv, re, statistics, sys
out, reps, threads, gen, cases, model, batch = sys.argv[1:8]
reps = int(reps)
cases = [int(c) for c in cases.split()]

def values(engine, ctx, col):
    v = []
    for r in range(1, reps + 1):
        with open(f"{out}/{engine}-{ctx}-r{r}.csv") as f:
            rows = list(csv.DictReader(f))
        v.append(float(rows[-1][col]))
    return v

def cell(v):
    m = statistics.median(v)
    return f"{m:.2f}" if len(v) == 1 else f"{m:.2f} ({min(v):.2f}–{max(v):.2f})"

bw = float(re.search(r"median ([0-9.]+) GB/s", open(f"{out}/membw.txt").read()).group(1))
db = open(f"{out}/decode_bytes.txt").read()
bpt = float(re.search(r"bytes_per_token (\d+)", db).group(1))  # every product (llama.cpp)
# ds4's bytes at each context (it skips the indexer's queries below 4 x top-k: decode_bytes).
bpt_ds4 = {int(c): float(b) for c, b in re.findall(r"bytes_per_token_at (\d+) (\d+)", db)}
runs = "1 run" if reps == 1 else f"the median of {reps} runs (range in parentheses)"
print(f"Model {model}, {threads} thread(s), prompt batches of {batch} tokens, {runs} after a "
      f"warm-up; decode probe of {gen} tokens.\n")
print("| measure | ds4 | llama.cpp | ds4 / llama.cpp | paired |")
print("|---|---|---|---|---|")
decode = {}
for ctx in cases:
    for col, name in (("prefill_tps", f"prefill t/s, {ctx}-token prompt"),
                      ("gen_tps", f"decode t/s at context {ctx}")):
        a, b = values("ds4", ctx, col), values("llama", ctx, col)
        ma, mb = statistics.median(a), statistics.median(b)
        ratio = f"{ma / mb:.2f}" if mb > 0 else "n/a"
        pairs = [x / y for x, y in zip(a, b) if y > 0]
        paired = f"{statistics.median(pairs):.2f}" if pairs else "n/a"
        print(f"| {name} | {cell(a)} | {cell(b)} | {ratio} | {paired} |")
        if col == "gen_tps":
            decode[ctx] = (a, b)
print()
print(f"- memory read bandwidth ({threads} thread(s), membw_probe after the runs): {bw:.1f} GB/s")
print(f"- weight bytes read per decode token (decode_bytes): {bpt / 1e6:.0f} MB; ds4 "
      + ", ".join(f"{bpt_ds4[c] / 1e6:.0f} MB at context {c}" for c in decode))
# Prefill against the int8 peak: 2 x the weight values a prompt token multiplies
# (decode_bytes; attention's work not counted) x t/s, over membw_probe --int8-peak's peak.
ops = float(re.search(r"prefill_ops_per_token (\d+)", db).group(1))
peak_m = re.search(r"int8_peak_gops ([0-9.]+)", open(f"{out}/membw.txt").read())
peak = float(peak_m.group(1)) if peak_m else 0.0
how = re.search(r"^(int8 peak .*)$", open(f"{out}/membw.txt").read(), re.M)
if how:
    print(f"- {how.group(1)}")
for ctx in cases:
    a, b = values("ds4", ctx, "prefill_tps"), values("llama", ctx, "prefill_tps")
    ga, gb = ops * statistics.median(a) / 1e9, ops * statistics.median(b) / 1e9
    share = (lambda g: f", {100 * g / peak:.1f}% of the int8 peak") if peak > 0 else (lambda g: "")
    print(f"- prefill of a {ctx}-token prompt runs the weight products at {ga:.0f} GOP/s (ds4{share(ga)}) "
          f"vs {gb:.0f} GOP/s (llama.cpp{share(gb)}); {ops / 1e9:.2f} GOP per token")
for ctx, (a, b) in decode.items():
    ma, mb = statistics.median(a), statistics.median(b)
    bd = bpt_ds4[ctx]
    print(f"- decode at context {ctx} streams {bd * ma / 1e9:.2f} GB/s (ds4, "
          f"{100 * bd * ma / 1e9 / bw:.0f}% of the bandwidth) vs {bpt * mb / 1e9:.2f} GB/s "
          f"(llama.cpp, {100 * bpt * mb / 1e9 / bw:.0f}%)")
def times(engine, ctx):  # (wall, user + sys) seconds of each repetition's process
    v = []
    for r in range(1, reps + 1):
        try:
            e, u, s = (float(x) for x in open(f"{out}/{engine}-{ctx}-r{r}.time").read().split()[-3:])
        except (OSError, ValueError):
            return []
        v.append((e, u + s))
    return v
for ctx in cases:
    ta, tb = times("ds4", ctx), times("llama", ctx)
    if ta and tb:
        wa, ca = statistics.median(t[0] for t in ta), statistics.median(t[1] for t in ta)
        wb, cb = statistics.median(t[0] for t in tb), statistics.median(t[1] for t in tb)
        print(f"- whole process at context {ctx} (load, warm-up, prefill, decode; medians): ds4 "
              f"{wa:.1f} s wall, {ca:.1f} s CPU; llama.cpp {wb:.1f} s wall, {cb:.1f} s CPU "
              f"(CPU ratio llama.cpp / ds4 {cb / ca:.2f})")
probes = []
for r in range(1, reps + 1):
    m = re.search(r"median ([0-9.]+) GB/s", open(f"{out}/membw-r{r}.txt").read())
    probes.append(float(m.group(1)))
# The long probe is one moment of a VM whose memory speed moves within minutes; the share of
# the probe taken right before each repetition is the steadier reading.
for ctx, (a, b) in decode.items():
    shares = [bpt_ds4[ctx] * a[r] / 1e9 / probes[r] for r in range(reps)]
    print(f"- decode at context {ctx}, against the short probe before each repetition: ds4 "
          f"{100 * statistics.median(shares):.0f}% (median; {100 * min(shares):.0f}-{100 * max(shares):.0f}%)")
print()
print("Per repetition: the short probe before it, then each context's decode t/s (ds4 / "
      "llama.cpp = ratio; ds4's share of that probe).\n")
print("| rep | probe GB/s | " + " | ".join(f"decode at {c}" for c in decode) + " |")
print("|---|---|" + "---|" * len(decode))
for r in range(reps):
    row = []
    for ctx, (a, b) in decode.items():
        ratio = a[r] / b[r] if b[r] > 0 else float("nan")
        row.append(f"{a[r]:.1f} / {b[r]:.1f} = {ratio:.2f}x; {100 * bpt_ds4[ctx] * a[r] / 1e9 / probes[r]:.0f}%")
    print(f"| {r + 1} | {probes[r]:.1f} | " + " | ".join(row) + " |")
EOF
echo "== results in $out" >&2
cat "$out/summary.md"
