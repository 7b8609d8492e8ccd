#!/usr/bin/env bash
# Builds everything and runs the whole test suite, as CI does (.ci/run calls this):
#   1. Release build (GCC), all CTest tests, oracle comparisons included;
#   2. clang build with AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer: the
#      parser tests and the replay of every fuzz corpus.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/setup.sh
jobs=${DS4_JOBS:-$(nproc)}

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 900

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_C_COMPILER=clang -DDS4_SANITIZE=ON -DDS4_FUZZ=ON -DDS4_BENCH=OFF >/dev/null
# Only what the sanitize label runs: the parser tests (tests/unit/gguf*) and the fuzz targets
# (fuzz/*_fuzz.cpp; their dependencies, e.g. ds4 for the inspect test, come along).
asan_targets=()
for f in tests/unit/gguf*_test.cpp; do asan_targets+=("$(basename "$f" .cpp)"); done
for f in fuzz/*_fuzz.cpp; do asan_targets+=("fuzz_$(basename "$f" _fuzz.cpp)"); done
cmake --build build-asan -j "$jobs" --target "${asan_targets[@]}"
ctest --test-dir build-asan --output-on-failure -j "$jobs" -L sanitize --timeout 900
