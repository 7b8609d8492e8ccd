#!/usr/bin/env bash
# SSD streaming benchmark: ds4-bench with --ssd-streaming at several expert-cache budgets against
# llama.cpp (ds4-peer-bench: the oracle's libraries, its default mmap of the file) on the same
# Flash-shaped q2 GGUF larger than this machine's memory (docs/PERFORMANCE.md, "SSD streaming";
# docs/SSD_STREAMING.md). Prints a markdown table.
#
#   bench/ssd_streaming.sh [--model FILE] [--layers N] [--budgets "4GB 8GB 16GB"] [--ctx N]
#                          [--gen-tokens N] [--threads N] [--batch N] [--build DIR] [--jobs N]
#                          [--out DIR] [--no-build] [--no-llama] [--warm] [--ds4-flags "..."]
#                          [--compare-lookahead] [--probe-seconds N]
#
# Measured per engine / budget, from one walk with a single frontier (--ctx-start = --ctx-max =
# --ctx, default 512): prefill t/s of the --ctx-token prompt and decode t/s of a greedy probe of
# --gen-tokens tokens (default 32) after it; for ds4 also the expert cache's hit rate and the
# bytes it read from the disk per evaluated token (prompt + probe). Each run starts with the
# file dropped from the page cache (POSIX_FADV_DONTNEED) and, unless --warm, an empty expert
# cache (--ssd-streaming-cold), so every engine reads what it needs from the disk.
#
# The model defaults to $DS4_BIG_MODEL or /var/tmp/ds4-flash16-q2.gguf (outside the git tree):
# the real Flash shape cut to --layers layers (default 16: ~31 GB) with the published q2 recipe,
# written by ds4-gguf-gen when missing (the disk must have room for it). Point --model at any
# deepseek4 GGUF to reuse one; --budgets takes any --ssd-streaming-cache-experts values.
# --no-llama skips llama.cpp (e.g. when the oracle is not installed).
# --ds4-flags adds flags to every ds4 run, e.g. "--ssd-streaming-direct" (O_DIRECT reads).
# --compare-lookahead runs each budget twice, with and without --ssd-streaming-no-lookahead.
#
# The disk bound: before each ds4 run, a probe reads random 7 MiB ranges of the model file with
# O_DIRECT, 4 at a time (the cache's default I/O threads) for --probe-seconds (default 10),
# as the cache reads experts. From each decode probe's own counters (ds4-bench's "ssd streaming,
# decode probe" line) the table gives the bytes read per decoded token, the time per token
# spent waiting for reads and computing, and the decode speed the disk alone would allow
# (probe GB/s / bytes per token): "x below the bound" is that speed over the measured one.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
model="${DS4_BIG_MODEL:-/var/tmp/ds4-flash16-q2.gguf}"
layers=16
budgets="4GB 8GB 16GB"
ctx=512
gen=32
threads=$(nproc)
batch=512
build="$root/build"
jobs=2
out=""
build_first=1
llama=1
cold=(--ssd-streaming-cold)
ds4_flags=()
compare_la=0
probe_seconds=10

usage() { sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="$2"; shift ;;
    --layers) layers="$2"; shift ;;
    --budgets) budgets="$2"; shift ;;
    --ctx) ctx="$2"; shift ;;
    --gen-tokens) gen="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --batch) batch="$2"; shift ;;
    --build) build="$2"; shift ;;
    --jobs) jobs="$2"; shift ;;
    --out) out="$2"; shift ;;
    --no-build) build_first=0 ;;
    --no-llama) llama=0 ;;
    --warm) cold=() ;;
    --ds4-flags) read -r -a ds4_flags <<< "$2"; shift ;;
    --compare-lookahead) compare_la=1 ;;
    --probe-seconds) probe_seconds="$2"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "ssd_streaming.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for v in "$layers" "$ctx" "$gen" "$threads" "$batch" "$jobs" "$probe_seconds"; do
  [[ "$v" =~ ^[0-9]+$ && "$v" -gt 0 ]] || { echo "ssd_streaming.sh: '$v' is not a positive integer" >&2; exit 2; }
done
[[ -n "$budgets" ]] || { echo "ssd_streaming.sh: --budgets is empty" >&2; exit 2; }
out=${out:-"$build/ssd_streaming/$(date +%Y%m%d-%H%M%S)"}
mkdir -p "$out"
bin="$build/bin"

if [[ $build_first == 1 ]]; then
  echo "== build (Release, $build)" >&2
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$build" -j "$jobs" ds4-bench ds4-gguf-gen >&2
  [[ $llama == 1 ]] && { ninja -C "$build" -j "$jobs" ds4-peer-bench >&2 || true; }
fi
exes="ds4-bench ds4-gguf-gen"
[[ $llama == 1 ]] && exes="$exes ds4-peer-bench"
for exe in $exes; do
  if [[ ! -x "$bin/$exe" ]]; then
    [[ $exe == ds4-peer-bench ]] && hint="install the llama.cpp oracle with scripts/setup.sh, or pass --no-llama" || hint="build it"
    echo "ssd_streaming.sh: $bin/$exe is not available: $hint" >&2
    exit 1
  fi
done

if [[ ! -f "$model" ]]; then
  mkdir -p "$(dirname "$model")"
  need_kib=$(( layers * 1900 * 1024 + 3 * 1024 * 1024 ))  # ~1.8 GiB a layer + embedding and head
  avail_kib=$(df -Pk "$(dirname "$model")" | awk 'NR == 2 { print $4 }')
  if (( avail_kib < need_kib )); then
    echo "ssd_streaming.sh: $model is missing and $(dirname "$model") has less than $((need_kib / 1024 / 1024)) GiB free to write it" >&2
    exit 1
  fi
  echo "== writing $model (Flash shape, $layers layers, q2 recipe)" >&2
  "$bin/ds4-gguf-gen" --preset flash --layers "$layers" -o "$model" --threads "$jobs" >&2
fi
model_bytes=$(stat -c %s "$model")
mem_bytes=$(( $(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo) * 1024 ))
(( model_bytes > mem_bytes )) || echo "ssd_streaming.sh: note: $model ($model_bytes bytes) is not larger than this machine's memory ($mem_bytes bytes)" >&2

n_vocab=$(python3 - "$model" <<'EOF2'
import struct, sys
# general GGUF header walk: find tokenizer / vocab size from the token_embd tensor's ne[1]
f = open(sys.argv[1], "rb")
magic, version, n_tensors, n_kv = struct.unpack("<IIQQ", f.read(24))
def rstr():
    (n,) = struct.unpack("<Q", f.read(8)); return f.read(n).decode("utf-8", "replace")
sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip(t):
    if t == 8: rstr()
    elif t == 9:
        et, n = struct.unpack("<IQ", f.read(12))
        for _ in range(n): skip(et)
    else: f.read(sizes[t])
for _ in range(n_kv):
    rstr(); (t,) = struct.unpack("<I", f.read(4)); skip(t)
for _ in range(n_tensors):
    name = rstr(); (nd,) = struct.unpack("<I", f.read(4))
    ne = struct.unpack(f"<{nd}Q", f.read(8 * nd)); f.read(12)
    if name == "token_embd.weight": print(ne[1]); break
EOF2
)
# A fixed pseudo-random prompt (the same for every run).
awk -v n="$ctx" -v v="$n_vocab" 'BEGIN { srand(1); for (i = 0; i < n; i++) printf "%d ", int(rand() * v); print "" }' > "$out/ids.txt"

drop_cache() {
  python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$model"
}
common=(-m "$model" --token-ids "$out/ids.txt" --ctx-start "$ctx" --ctx-max "$ctx" --gen-tokens "$gen" --threads "$threads")

# The disk's random-read rate for expert-sized O_DIRECT reads, 4 in flight, just before each
# ds4 run (a shared disk's rate drifts over minutes): disk_probe FILE.
disk_probe() {
  drop_cache
  python3 - "$model" "$probe_seconds" > "$1" <<'EOF2'
import mmap, os, random, sys, threading, time
path, seconds = sys.argv[1], float(sys.argv[2])
size, block, chunk = os.path.getsize(path), 4096, 7 << 20
total = [0]
lock = threading.Lock()
end = time.monotonic() + seconds
def reader(seed):
    rng = random.Random(seed)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        fd = os.open(path, os.O_RDONLY)
    buf = mmap.mmap(-1, chunk)  # page-aligned, as O_DIRECT wants
    n = 0
    while time.monotonic() < end:
        off = rng.randrange(0, (size - chunk) // block) * block
        n += os.preadv(fd, [buf], off)
    os.close(fd)
    with lock:
        total[0] += n
t0 = time.monotonic()
ts = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print(f"{total[0] / (time.monotonic() - t0) / 1e9:.3f}")
EOF2
}

variants=("")
[[ $compare_la == 1 ]] && variants=("" "--ssd-streaming-no-lookahead")
runs=()
for b in $budgets; do
  for v in "${variants[@]}"; do
    name="$b${v:+-nolookahead}"
    runs+=("$name")
    disk_probe "$out/disk-$name.txt"
    echo "== ds4, --ssd-streaming-cache-experts $b $v (disk probe: $(cat "$out/disk-$name.txt") GB/s)" >&2
    drop_cache
    if ! "$bin/ds4-bench" "${common[@]}" --prefill-chunk "$batch" --ssd-streaming --ssd-streaming-cache-experts "$b" \
         "${cold[@]}" "${ds4_flags[@]}" $v --csv "$out/ds4-$name.csv" > "$out/ds4-$name.log" 2>&1; then
      echo "ssd_streaming.sh: ds4 failed at budget $b, see $out/ds4-$name.log:" >&2
      tail -5 "$out/ds4-$name.log" >&2
      exit 1
    fi
  done
done
if [[ $llama == 1 ]]; then
  echo "== llama.cpp (mmap)" >&2
  drop_cache
  if ! "$bin/ds4-peer-bench" "${common[@]}" --batch "$batch" --csv "$out/llama.csv" > "$out/llama.log" 2>&1; then
    echo "ssd_streaming.sh: llama.cpp failed, see $out/llama.log:" >&2
    tail -5 "$out/llama.log" >&2
    exit 1
  fi
fi

python3 - "$out" "$model" "$model_bytes" "$mem_bytes" "$ctx" "$gen" "$threads" "$llama" "${runs[@]}" > "$out/summary.md" <<'EOF2'
import csv, re, sys
out, model, model_bytes, mem_bytes, ctx, gen, threads, llama = sys.argv[1:9]
budgets = sys.argv[9:]
ctx, gen = int(ctx), int(gen)

def row(path):
    with open(path) as f:
        r = list(csv.DictReader(f))[-1]
    return float(r["prefill_tps"]), float(r["gen_tps"])

ll = row(f"{out}/llama.csv") if llama == "1" else None
gib = lambda b: f"{int(b) / 2**30:.1f} GiB"
print(f"Model {model} ({gib(model_bytes)}; machine memory {gib(mem_bytes)}), {threads} threads, "
      f"{ctx}-token prompt, decode probe of {gen} tokens, page cache dropped before each run; "
      f"disk probe before each ds4 run: random 7 MiB O_DIRECT reads, 4 in flight.\n")
print("| engine | cache | prefill t/s | decode t/s | decode vs llama.cpp | prefill vs llama.cpp | hit rate | disk bytes / token "
      "| decode: misses / token | decode: MB read / token | decode: s waiting / computing per token | disk probe GB/s | disk-bound decode t/s | x below the bound |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for b in budgets:
    p, d = row(f"{out}/ds4-{b}.csv")
    log = open(f"{out}/ds4-{b}.log").read()
    eff = re.search(r"effective ([0-9.]+ [KMG]iB) \((\d+) experts", log)
    st = re.search(r"hit rate ([0-9.]+)%.*?\((\d+) bytes\)", log)
    hit = f"{st.group(1)}%" if st else "n/a"
    # tokens evaluated: the prompt and the probe (ds4-bench's probe evaluates gen - 1 tokens
    # after the prompt's logits).
    per_tok = f"{int(st.group(2)) / (ctx + gen):.3g}" if st else "n/a"
    name = b.replace("-nolookahead", "")
    cache = f"{name} ({eff.group(1)}, {eff.group(2)} experts)" if eff else name
    rd = f"{d / ll[1]:.2f}" if ll and ll[1] > 0 else "n/a"
    rp = f"{p / ll[0]:.2f}" if ll and ll[0] > 0 else "n/a"
    dp = re.search(r"decode probe: \d+ tokens, ([0-9.]+) misses.*?\(([0-9.]+) forecast reads, ([0-9.]+) used\), "
                   r"([0-9.]+) MB read per token.*?of which ([0-9.]+) s waiting for reads and ([0-9.]+) s computing", log)
    disk = float(open(f"{out}/disk-{b}.txt").read())
    if dp:
        mb = float(dp.group(4))
        bound = disk * 1e3 / mb if mb > 0 else float("inf")
        dcols = (f"{dp.group(1)} (+{dp.group(2)} forecast, {dp.group(3)} used) | {mb:.0f} | {dp.group(5)} / {dp.group(6)} "
                 f"| {disk:.2f} | {bound:.2f} | {bound / d:.2f} |")
    else:
        dcols = f"n/a | n/a | n/a | {disk:.2f} | n/a | n/a |"
    engine = "ds4 --ssd-streaming" + (" --ssd-streaming-no-lookahead" if b.endswith("-nolookahead") else "")
    print(f"| {engine} | {cache} | {p:.2f} | {d:.2f} | {rd} | {rp} | {hit} | {per_tok} | {dcols}")
if ll:
    print(f"| llama.cpp (mmap) | page cache | {ll[0]:.2f} | {ll[1]:.2f} | 1.00 | 1.00 | n/a | n/a | | | | | | |")
EOF2
cat "$out/summary.md"
echo "(logs and CSVs in $out)" >&2
