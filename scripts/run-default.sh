#!/usr/bin/env bash
# The newcomer's first command: installs dependencies, builds, writes the embedded default
# model and chats with it once: render, tokenize, prefill, sample, decode, detokenize.
#
# The default model (models/default.gguf) is a tiny DeepSeek-V4-architecture GGUF made by
# ds4-gguf-gen with the REAL DeepSeek V4 tokenizer (129280 tokens) but RANDOM WEIGHTS: it is not
# a trained model, so its answer is gibberish made of real tokens. It exists so the whole
# pipeline runs without the 80 GB download; for real answers pass -m ds4flash.gguf. It declares
# a 65536-token context, so coding agents' 7-12k-token prompts fit `ds4-server -m
# models/default.gguf` (which uses 32768 of it by default).
# Extra arguments go to ds4 (e.g. -p "other text", --temp 0, --threads 1, --think).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target ds4 ds4-gguf-gen
mkdir -p models
# Models written before the default carried the real vocabulary, or before it declared its
# 65536-token context, are replaced.
info=$( [ -f models/default.gguf ] && ./build/bin/ds4 --inspect models/default.gguf 2>/dev/null || true)
if [ ! -f models/default.gguf ] || ! ./build/bin/ds4 -m models/default.gguf --dump-tokens --raw -p x >/dev/null 2>&1 ||
   ! grep -Eq '\.context_length +u32 +65536$' <<<"$info"; then
  ./build/bin/ds4-gguf-gen -q --preset tiny --real-vocab --type embd=q8_0 --type output=q8_0 \
    --ctx 65536 --seed 1 -o models/default.gguf
fi
echo "model: models/default.gguf (tiny, real DeepSeek V4 vocabulary, RANDOM weights: not trained)" >&2
exec ./build/bin/ds4 -m models/default.gguf -p "Hello! Who are you?" --nothink -n 32 "$@"
