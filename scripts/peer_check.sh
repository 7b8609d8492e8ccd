#!/usr/bin/env bash
# The upstream peer check (issue 38, docs/UPSTREAM_PEER.md): our forward pass and upstream ds4's
# CPU path on the same Flash-layout file, last position's logits compared.
#
#   scripts/peer_check.sh UPSTREAM_CHECKOUT [--work DIR] [--prompt TEXT] [--hole NAMES] [--keep]
#
# UPSTREAM_CHECKOUT is a checkout of upstream ds4 (antirez/ds4, or a fork; checked with
# b0309611); the script builds its CPU target there (`make cpu`) and never copies its code
# anywhere else. It writes a sparse Flash file with ds4-gguf-gen (non-routed tensors and
# experts 0-15 filled, the routing pinned to them; --hole NAMES leaves more tensors zero, e.g.
# `attn_output_b,ffn_down` for the bisect: only embedding, HC and head remain), runs both with
# the same prompt tokens, and prints correlation, max |diff| / std of ours, top-1 and top-k
# agreement. The file (~10 GiB of data, ~81 GiB apparent) is deleted at the end unless --keep.
# Needs our build in build/ (ds4, ds4-gguf-gen) and the real tokenizer (scripts/setup.sh).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 1 ] || { sed -n 2,16p "$0"; exit 2; }
up="$(cd "$1" && pwd)"; shift
work="${TMPDIR:-/tmp}/ds4-peer-check"
prompt="The capital of France is"
holes=""
keep=0
while [ $# -gt 0 ]; do
    case "$1" in
        --work) work="$2"; shift 2 ;;
        --prompt) prompt="$2"; shift 2 ;;
        --hole) holes="$2"; shift 2 ;;
        --keep) keep=1; shift ;;
        *) echo "peer_check: unknown argument $1" >&2; exit 2 ;;
    esac
done
bin="$here/build/bin"
[ -x "$bin/ds4" ] && [ -x "$bin/ds4-gguf-gen" ] || { echo "peer_check: build ds4 and ds4-gguf-gen first" >&2; exit 2; }
[ -f "$up/ds4_cli.c" ] || { echo "peer_check: $up is not an upstream ds4 checkout" >&2; exit 2; }
mkdir -p "$work"
threads="${PEER_CHECK_THREADS:-2}"

echo "== building upstream's CPU target in $up" >&2
make -C "$up" cpu -j "$threads" >"$work/upstream-build.log" 2>&1 || { tail -20 "$work/upstream-build.log"; exit 1; }

model="$work/flash-peer.gguf"
if [ ! -f "$model" ]; then
    echo "== writing the sparse Flash file $model" >&2
    args=(--preset flash --real-vocab --fill nonrouted --fill-experts 0-15 --seed 38 --threads "$threads" -o "$model")
    [ -n "$holes" ] && args+=(--hole "$holes")
    "$bin/ds4-gguf-gen" -q "${args[@]}"
fi
cleanup() { [ "$keep" = 1 ] || rm -f "$model"; }
trap cleanup EXIT

echo "== upstream ds4 (CPU)" >&2
DS4_LOCK_FILE="$work/upstream.lock" "$up/ds4" -m "$model" --cpu -t "$threads" --ctx 256 \
    -p "$prompt" --dump-tokens >"$work/upstream-tokens.txt" 2>"$work/upstream-tokens.err" || true
# --raw-prompt: the prompt's plain tokens (no chat template), the ids its --dump-tokens prints.
DS4_LOCK_FILE="$work/upstream.lock" "$up/ds4" -m "$model" --cpu -t "$threads" --ctx 256 --raw-prompt \
    -p "$prompt" --dump-logits "$work/upstream-logits.json" 2>"$work/upstream.err" ||
    { tail -20 "$work/upstream.err"; exit 1; }

echo "== ours" >&2
# Upstream's own tokens of the prompt (the first line of its --dump-tokens: "[id, id, ...]"),
# so both evaluate the same ids; ours tokenizes when that line is missing.
if ! sed -n '1s/^\[\(.*\)\]$/\1/p' "$work/upstream-tokens.txt" | tr -d ',' | grep -q '[0-9]'; then
    "$bin/ds4" -m "$model" -t "$threads" --raw -p "$prompt" --dump-tokens >"$work/ours-tokens.txt"
else
    sed -n '1s/^\[\(.*\)\]$/\1/p' "$work/upstream-tokens.txt" | tr -d ',' >"$work/ours-tokens.txt"
fi
"$bin/ds4" -m "$model" -t "$threads" --token-ids "$work/ours-tokens.txt" \
    --dump-logits-f32 "$work/ours-logits.f32" >/dev/null 2>"$work/ours.err" || { tail -20 "$work/ours.err"; exit 1; }

python3 - "$work" <<'EOF'
import json, math, re, struct, sys
work = sys.argv[1]
up = json.load(open(f"{work}/upstream-logits.json"))
V = up["vocab"]
u = [float("nan") if x is None else x for x in up["logits"]]
raw = open(f"{work}/ours-logits.f32", "rb").read()
rows = len(raw) // (4 * V)
o = list(struct.unpack_from(f"<{V}f", raw, (rows - 1) * 4 * V))
ours_tok = open(f"{work}/ours-tokens.txt").read().split()
m = re.search(r"\[([0-9, ]*)\]", open(f"{work}/upstream-tokens.txt").read())
up_tok = m.group(1).replace(",", " ").split() if m else []
n = len(o)
mo, mu = sum(o) / n, sum(u) / n
so = math.sqrt(sum((x - mo) ** 2 for x in o) / n)
su = math.sqrt(sum((x - mu) ** 2 for x in u) / n)
cov = sum((a - mo) * (b - mu) for a, b in zip(o, u)) / n
diff = max(abs(a - b) for a, b in zip(o, u))
top = lambda v, k: sorted(range(n), key=lambda i: -v[i])[:k]
to, tu = top(o, 10), top(u, 10)
print(f"prompt tokens: ours {len(ours_tok)} {ours_tok}, upstream's logits over {up['prompt_tokens']}"
      + ("" if not up_tok else f" (its --dump-tokens: {up_tok})"))
if len(ours_tok) != up["prompt_tokens"]:
    print("WARNING: the two evaluated different token counts")
print(f"correlation {cov / (so * su):.6f}")
print(f"max |diff| {diff:.5g} = {diff / so:.4f} x std(ours) {so:.5g}")
print(f"top-1 ours {to[0]} upstream {tu[0]} ({'agree' if to[0] == tu[0] else 'differ'})")
print(f"top-10 overlap {len(set(to) & set(tu))}/10; ours {to[:5]} upstream {tu[:5]}")
EOF
