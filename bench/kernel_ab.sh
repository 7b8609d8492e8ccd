#!/usr/bin/env bash
# Old vs new IQ2_XXS / Q2_K / Q8_0 AVX-512 kernels in one process (bench/kernel_ab.cpp): the kernel
# files of REV (default HEAD) are compiled into namespace ds4old, with this tree's headers, and
# linked beside the build's libraries (this tree's kernels). Build the libraries first
# (cmake --build build --target ds4core).
#
#   bench/kernel_ab.sh [--rev REV] [--build DIR] -- FORMAT[:COLS] KIB REPS [T ...]
#   taskset -c 0 bench/kernel_ab.sh --rev HEAD~1 -- iq2_xxs 1024 41          # in L2
#   taskset -c 0 bench/kernel_ab.sh --rev HEAD~1 -- iq2_xxs 262144 11 1 2 3 4 5   # DRAM
#   taskset -c 0 bench/kernel_ab.sh --rev HEAD~1 -- q8_0:8192 1024 21 16 30 60     # prefill tiles
set -euo pipefail
rev=HEAD
build=build
while [[ $# -gt 0 ]]; do
  case $1 in
    --rev) rev=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "kernel_ab.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
simd="-mavx2 -mfma -mf16c -mbmi2 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni"
for f in iq2_xxs/iq2_xxs_vbmi_avx512 iq2_xxs/iq2_xxs_multi_avx512 q2_k/q2_k_multi_avx512 q2_k/q2_k_avx512 q8_0/q8_0_multi_avx512; do
  git -C "$root" show "$rev:src/quant/$f.cpp" > "$out/$(basename $f).cpp"
  # shellcheck disable=SC2086
  c++ -O3 -DNDEBUG -std=c++20 $simd -Dds4=ds4old -I"$root/src" -c "$out/$(basename $f).cpp" -o "$out/$(basename $f).o"
done
libs=()
for l in quant gguf common; do libs+=("$root/$build/src/libds4_$l.a"); done
c++ -O3 -DNDEBUG -std=c++20 -DFMT_SHARED -I"$root/src" "$root/bench/kernel_ab.cpp" "$out"/*.o "${libs[@]}" \
    -lfmt -lpthread -o "$out/kernel_ab"
"$out/kernel_ab" "$@"
