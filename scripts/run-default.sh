#!/usr/bin/env bash
# The newcomer's first command: installs dependencies, builds, writes the embedded default
# model (a small random DeepSeek-V4-architecture GGUF made by ds4-gguf-gen: NOT trained
# weights) and runs the engine on it: prefill of a few token ids, then a greedy continuation.
# Extra arguments go to ds4 (e.g. --no-qat, --threads 1, --inspect).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target ds4 ds4-gguf-gen
mkdir -p models
[ -f models/default.gguf ] || ./build/bin/ds4-gguf-gen -q --preset tiny --seed 1 -o models/default.gguf
echo "0 10 20 30 40 50 60 70" > models/default-prompt.ids
echo "model: models/default.gguf (random weights; see README). Prompt token ids: $(cat models/default-prompt.ids)"
echo "greedy continuation (token ids):"
exec ./build/bin/ds4 -m models/default.gguf --token-ids models/default-prompt.ids -n 32 "$@"
