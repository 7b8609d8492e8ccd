#!/usr/bin/env bash
# The upstream peer check (issue 38, docs/PEER_CHECK.md): our forward pass and upstream ds4's
# CPU path on the same Flash-layout file, last position's logits compared.
#
#   scripts/peer_check.sh UPSTREAM_CHECKOUT [--step NAME | --hole NAMES] [--diag LIST | --env VAR=VALUE]
#                         [--work DIR] [--prompt TEXT] [--ours-only] [--keep]
#
# UPSTREAM_CHECKOUT is a checkout of upstream ds4 (antirez/ds4, or a fork; checked with
# b0309611); the script builds its CPU target there (`make cpu`) and never copies its code
# anywhere else. It writes a sparse Flash file with ds4-gguf-gen (non-routed tensors and
# experts 0-15 filled, the routing pinned to them; --hole NAMES leaves more tensors zero), runs
# both with the same prompt tokens, and prints correlation, max |diff| / std of ours, top-1 and
# top-k agreement. The bisect's steps by name (--step; the work dir becomes DIR/NAME):
#   embed   embedding, HC mixing, head (every attention and FFN tensor a hole)
#   attn    + attention (with its compressor and indexer); FFN holes
#   shexp   embedding, HC, head + the shared expert (attention and routed experts holes)
#   routed  embedding, HC, head + the routed experts (attention and shared expert holes)
#   ffn     both experts, no attention
#   full    the whole model
# --diag LIST runs ours a second time with DS4_PEER_DIAG=LIST (src/model/deepseek4/peer_diag.h,
# e.g. kv_f16) and prints that run against upstream and against ours; --env VAR=VALUE does the
# same with another variable (DS4_GGML_COMPAT=1: only the dots' summation order changes, which
# measures how far this random model carries a rounding-level difference). --ours-only reuses the
# upstream logits already in the work dir. The file (3-10 GiB of data, ~81 GiB apparent) is
# deleted at the end unless --keep. Needs our build in build/ (ds4, ds4-gguf-gen) and the real
# tokenizer (scripts/setup.sh).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 1 ] || { sed -n 2,26p "$0"; exit 2; }
up="$(cd "$1" && pwd)"; shift
work="${TMPDIR:-/tmp}/ds4-peer-check"
prompt="The capital of France is"
holes=""
step=""
diag=""
ours_only=0
keep=0
while [ $# -gt 0 ]; do
    case "$1" in
        --work) work="$2"; shift 2 ;;
        --prompt) prompt="$2"; shift 2 ;;
        --hole) holes="$2"; shift 2 ;;
        --step) step="$2"; shift 2 ;;
        --diag) diag="DS4_PEER_DIAG=$2"; shift 2 ;;
        --env) diag="$2"; shift 2 ;;
        --ours-only) ours_only=1; shift ;;
        --keep) keep=1; shift ;;
        *) echo "peer_check: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ -n "$step" ]; then
    case "$step" in
        embed) holes=".attn_,.ffn_,.indexer" ;;
        attn) holes=".ffn_" ;;
        shexp) holes=".attn_,.indexer,_exps" ;;
        routed) holes=".attn_,.indexer,_shexp" ;;
        ffn) holes=".attn_,.indexer" ;;
        full) holes="" ;;
        *) echo "peer_check: unknown step $step (embed, attn, shexp, routed, ffn, full)" >&2; exit 2 ;;
    esac
    work="$work/$step"
fi
bin="$here/build/bin"
[ -x "$bin/ds4" ] && [ -x "$bin/ds4-gguf-gen" ] || { echo "peer_check: build ds4 and ds4-gguf-gen first" >&2; exit 2; }
[ -f "$up/ds4_cli.c" ] || { echo "peer_check: $up is not an upstream ds4 checkout" >&2; exit 2; }
mkdir -p "$work"
threads="${PEER_CHECK_THREADS:-2}"

if [ "$ours_only" = 0 ]; then
    echo "== building upstream's CPU target in $up" >&2
    make -C "$up" cpu -j "$threads" >"$work/upstream-build.log" 2>&1 || { tail -20 "$work/upstream-build.log"; exit 1; }
elif [ ! -f "$work/upstream-logits.json" ] || [ ! -f "$work/upstream-tokens.txt" ]; then
    echo "peer_check: --ours-only needs upstream's logits in $work from an earlier run" >&2; exit 2
fi

model="$work/flash-peer.gguf"
if [ ! -f "$model" ]; then
    echo "== writing the sparse Flash file $model" >&2
    args=(--preset flash --real-vocab --fill nonrouted --fill-experts 0-15 --seed 38 --threads "$threads" -o "$model")
    [ -n "$holes" ] && args+=(--hole "$holes")
    "$bin/ds4-gguf-gen" -q "${args[@]}"
fi
cleanup() { [ "$keep" = 1 ] || rm -f "$model"; }
trap cleanup EXIT

if [ "$ours_only" = 0 ]; then
    echo "== upstream ds4 (CPU)" >&2
    DS4_LOCK_FILE="$work/upstream.lock" "$up/ds4" -m "$model" --cpu -t "$threads" --ctx 256 \
        -p "$prompt" --dump-tokens >"$work/upstream-tokens.txt" 2>"$work/upstream-tokens.err" || true
    # --raw-prompt: the prompt's plain tokens (no chat template), the ids its --dump-tokens prints.
    DS4_LOCK_FILE="$work/upstream.lock" "$up/ds4" -m "$model" --cpu -t "$threads" --ctx 256 --raw-prompt \
        -p "$prompt" --dump-logits "$work/upstream-logits.json" 2>"$work/upstream.err" ||
        { tail -20 "$work/upstream.err"; exit 1; }
fi

echo "== ours" >&2
# Upstream's own tokens of the prompt (the first line of its --dump-tokens: "[id, id, ...]"),
# so both evaluate the same ids; ours tokenizes when that line is missing.
if ! sed -n '1s/^\[\(.*\)\]$/\1/p' "$work/upstream-tokens.txt" | tr -d ',' | grep -q '[0-9]'; then
    "$bin/ds4" -m "$model" -t "$threads" --raw -p "$prompt" --dump-tokens >"$work/ours-tokens.txt"
else
    sed -n '1s/^\[\(.*\)\]$/\1/p' "$work/upstream-tokens.txt" | tr -d ',' >"$work/ours-tokens.txt"
fi
DS4_PEER_DIAG= "$bin/ds4" -m "$model" -t "$threads" --token-ids "$work/ours-tokens.txt" \
    --dump-logits-f32 "$work/ours-logits.f32" >/dev/null 2>"$work/ours.err" || { tail -20 "$work/ours.err"; exit 1; }
if [ -n "$diag" ]; then
    echo "== ours with $diag" >&2
    env DS4_PEER_DIAG= "$diag" "$bin/ds4" -m "$model" -t "$threads" --token-ids "$work/ours-tokens.txt" \
        --dump-logits-f32 "$work/ours-diag-logits.f32" >/dev/null 2>"$work/ours-diag.err" ||
        { tail -20 "$work/ours-diag.err"; exit 1; }
fi

python3 - "$work" "$diag" <<'EOF'
import json, math, os, re, struct, sys
work, diag = sys.argv[1], sys.argv[2]
up = json.load(open(f"{work}/upstream-logits.json"))
V = up["vocab"]
u = [float("nan") if x is None else x for x in up["logits"]]

def last_row(path):
    raw = open(path, "rb").read()
    return list(struct.unpack_from(f"<{V}f", raw, (len(raw) // (4 * V) - 1) * 4 * V))

def compare(name, o, u):
    # o is the reference whose std the max |diff| is measured in.
    n = len(o)
    mo, mu = sum(o) / n, sum(u) / n
    so = math.sqrt(sum((x - mo) ** 2 for x in o) / n)
    su = math.sqrt(sum((x - mu) ** 2 for x in u) / n)
    cov = sum((a - mo) * (b - mu) for a, b in zip(o, u)) / n
    diff = max(abs(a - b) for a, b in zip(o, u))
    top = lambda v, k: sorted(range(n), key=lambda i: -v[i])[:k]
    to, tu = top(o, 10), top(u, 10)
    print(f"-- {name}")
    print(f"correlation {cov / (so * su):.6f}")
    print(f"max |diff| {diff:.5g} = {diff / so:.4f} x std {so:.5g}")
    print(f"top-1 {to[0]} vs {tu[0]} ({'agree' if to[0] == tu[0] else 'differ'})")
    print(f"top-10 overlap {len(set(to) & set(tu))}/10; {to[:5]} vs {tu[:5]}")

ours_tok = open(f"{work}/ours-tokens.txt").read().split()
m = re.search(r"\[([0-9, ]*)\]", open(f"{work}/upstream-tokens.txt").read())
up_tok = m.group(1).replace(",", " ").split() if m else []
print(f"prompt tokens: ours {len(ours_tok)} {ours_tok}, upstream's logits over {up['prompt_tokens']}"
      + ("" if not up_tok else f" (its --dump-tokens: {up_tok})"))
if len(ours_tok) != up["prompt_tokens"]:
    print("WARNING: the two evaluated different token counts")
o = last_row(f"{work}/ours-logits.f32")
compare("ours vs upstream", o, u)
if diag:
    d = last_row(f"{work}/ours-diag-logits.f32")
    compare(f"ours with {diag} vs upstream", d, u)
    compare(f"ours vs ours with {diag}", o, d)
EOF
