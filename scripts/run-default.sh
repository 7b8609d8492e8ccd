#!/usr/bin/env bash
# The newcomer's first command: installs dependencies, builds, writes the embedded default
# model (a small random DeepSeek-V4-architecture GGUF; NOT trained weights) and runs ds4 on it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target ds4 ds4-gguf-gen
mkdir -p models
[ -f models/default.gguf ] || ./build/bin/ds4-gguf-gen --preset tiny --seed 1 -o models/default.gguf
exec ./build/bin/ds4 -m models/default.gguf --inspect "$@"
