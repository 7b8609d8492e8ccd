#!/usr/bin/env bash
# Downloads DeepSeek V4 GGUF files from Hugging Face (docs/MODELS.md): resumable (.part files,
# HTTP ranges), each file checked against the size and SHA-256 the hub publishes for it (the
# X-Linked-Size / X-Linked-Etag headers of its resolve URL), the free disk space checked before
# the first byte. Main-model targets then point ./ds4flash.gguf at the file.
#
#   scripts/download_model.sh q2                  # Flash, 2-bit experts (~81 GB)
#   scripts/download_model.sh q4 --dry-run        # what would be fetched, nothing written
#   DS4_GGUF_DIR=/data/gguf scripts/download_model.sh mtp --token hf_...
#
# Environment: DS4_GGUF_DIR (target directory, default ./gguf), HF_TOKEN (or --token, or the
# huggingface CLI's token file), DS4_HF_ENDPOINT (default https://huggingface.co; the tests
# point it at a local server), DS4_FLASH_LINK (the link main-model targets update, default
# ./ds4flash.gguf).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
repo=antirez/deepseek-v4-gguf

# target: files (space-separated) and whether ./ds4flash.gguf should point at the first.
declare -A FILES LINK ABOUT
FILES[q2]=DeepSeek-V4-Flash-IQ2XXS-w2Q2K-AProjQ8-SExpQ8-OutQ8-chat-v2-imatrix.gguf
LINK[q2]=1; ABOUT[q2]="Flash, 2-bit routed experts (imatrix), about 81 GB: 96-128 GB RAM machines"
FILES[q2-q4]=DeepSeek-V4-Flash-Layers37-42Q4KExperts-OtherExpertLayersIQ2XXSGateUp-Q2KDown-AProjQ8-SExpQ8-OutQ8-chat-v2-imatrix-fixed.gguf
LINK[q2-q4]=1; ABOUT[q2-q4]="Flash, 2-bit experts with 4-bit experts in layers 37-42, about 98 GB"
FILES[q4]=DeepSeek-V4-Flash-Q4KExperts-F16HC-F16Compressor-F16Indexer-Q8Attn-Q8Shared-Q8Out-chat-v2-imatrix.gguf
LINK[q4]=1; ABOUT[q4]="Flash, 4-bit routed experts (imatrix), about 153 GB: 256 GB RAM or more"
FILES[mxfp4]=DeepSeek-V4-Flash-MXFP4Experts-F16HC-F16Compressor-F16Indexer-Q8Attn-Q8Shared-Q8Out-chat-v2-mxfp4.gguf
LINK[mxfp4]=1; ABOUT[mxfp4]="Flash, MXFP4 routed experts"
FILES[mtp]=DeepSeek-V4-Flash-MTP-Q4K-Q8_0-F32.gguf
LINK[mtp]=0; ABOUT[mtp]="Flash MTP head for speculative decoding (--mtp FILE), about 3.5 GB"
FILES[pro-q2]=DeepSeek-V4-Pro-IQ2XXS-w2Q2K-AProjQ8-SExpQ8-OutQ8-Instruct-imatrix.gguf
LINK[pro-q2]=1; ABOUT[pro-q2]="PRO, 2-bit experts (imatrix), one file of about 430 GB"
FILES[pro-q4-split]="DeepSeek-V4-Pro-Q4K-Layers00-30.gguf DeepSeek-V4-Pro-Q4K-Layers-31-output.gguf"
LINK[pro-q4-split]=0; ABOUT[pro-q4-split]="PRO, 4-bit experts as two split files (layers 0:30, 31:output) for a two-machine pipeline, about 838 GB"
TARGETS="q2 q2-q4 q4 mxfp4 mtp pro-q2 pro-q4-split"
# Upstream's names for the same targets.
declare -A ALIAS=([q2-imatrix]=q2 [q2-q4-imatrix]=q2-q4 [q4-imatrix]=q4 [pro-q2-imatrix]=pro-q2)

usage() {
    cat <<EOF
usage: scripts/download_model.sh TARGET [--token TOKEN] [--dir DIR] [--dry-run]

Targets:
EOF
    for t in $TARGETS; do printf '  %-13s %s\n' "$t" "${ABOUT[$t]}"; done
    cat <<EOF
  (upstream's names q2-imatrix, q2-q4-imatrix, q4-imatrix, pro-q2-imatrix also work)

Options:
  --token TOKEN  Hugging Face token (default: \$HF_TOKEN, then ~/.cache/huggingface/token)
  --dir DIR      where the files go (default: \$DS4_GGUF_DIR, else ./gguf)
  --dry-run      list the files, their sizes and where they would go; fetch nothing
An interrupted download resumes from its .part file when run again. Each file is checked
against the size and SHA-256 the hub publishes; a mismatch is refused and the .part removed.
Main-model targets then link ./ds4flash.gguf to the file.
EOF
}

die() { echo "download_model.sh: $*" >&2; exit 1; }

[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help|help) usage; exit 0 ;; esac
target=${ALIAS[$1]:-$1}
shift
[ -n "${FILES[$target]+x}" ] || { echo "download_model.sh: unknown target '$target'" >&2; usage >&2; exit 2; }
token=${HF_TOKEN:-}
dir=${DS4_GGUF_DIR:-gguf}
dry=0
while [ $# -gt 0 ]; do
    case "$1" in
        --token) [ $# -ge 2 ] || die "--token needs a value"; token=$2; shift 2 ;;
        --dir) [ $# -ge 2 ] || die "--dir needs a value"; dir=$2; shift 2 ;;
        --dry-run) dry=1; shift ;;
        *) die "unknown option '$1' (--help lists them)" ;;
    esac
done
if [ -z "$token" ] && [ -s "$HOME/.cache/huggingface/token" ]; then token=$(cat "$HOME/.cache/huggingface/token"); fi
case "$dir" in /*) ;; *) dir="$root/$dir" ;; esac
endpoint=${DS4_HF_ENDPOINT:-https://huggingface.co}
command -v curl >/dev/null || die "curl is needed (apt-get install curl)"
command -v sha256sum >/dev/null || die "sha256sum is needed (coreutils)"

auth=()
[ -n "$token" ] && auth=(-H "Authorization: Bearer $token")

# The published size and SHA-256 of a file (HEAD of its resolve URL, redirects not followed:
# the hub answers with X-Linked-Size and X-Linked-Etag, the LFS object's SHA-256).
declare -A SIZE SHA
probe() {
    local f=$1 url="$endpoint/$repo/resolve/main/$1" headers code
    if ! headers=$(curl -sS -I --max-time 30 "${auth[@]}" "$url" 2>&1); then
        die "cannot reach $endpoint (offline?): ${headers##*curl: }"
    fi
    code=$(printf '%s\n' "$headers" | awk 'NR==1 {print $2}')
    case "$code" in
        200|301|302|303|307|308) ;;
        401|403) die "$f: HTTP $code from $endpoint: the file needs a token (--token or HF_TOKEN)" ;;
        404) die "$f: not found at $url (HTTP 404)" ;;
        *) die "$f: HTTP ${code:-?} from $url" ;;
    esac
    SIZE[$f]=$(printf '%s\n' "$headers" | tr -d '\r' | awk -F': ' 'tolower($1)=="x-linked-size" {print $2}' | tail -1)
    SHA[$f]=$(printf '%s\n' "$headers" | tr -d '\r"' | awk -F': ' 'tolower($1)=="x-linked-etag" {print $2}' | tail -1)
    [[ "${SIZE[$f]}" =~ ^[0-9]+$ ]] || die "$f: the hub gave no size (X-Linked-Size) for $url"
    [[ "${SHA[$f]}" =~ ^[0-9a-f]{64}$ ]] || die "$f: the hub gave no SHA-256 (X-Linked-Etag) for $url"
}

human() { awk -v b="$1" 'BEGIN { split("B KB MB GB TB", u); i = 1; while (b >= 1000 && i < 5) { b /= 1000; i++ } printf "%.1f %s", b, u[i] }'; }

files=${FILES[$target]}
need=0
for f in $files; do
    probe "$f"
    have=0
    if [ -f "$dir/$f" ]; then have=${SIZE[$f]}; elif [ -f "$dir/$f.part" ]; then have=$(stat -c %s "$dir/$f.part"); fi
    need=$((need + SIZE[$f] - have))
    if [ "$dry" = 1 ]; then
        state="to fetch"
        [ -f "$dir/$f" ] && state="present"
        [ -f "$dir/$f.part" ] && state="partial, $(human "$have") of it"
        echo "$f  $(human "${SIZE[$f]}")  sha256 ${SHA[$f]}  -> $dir/$f ($state)"
    fi
done
if [ "$dry" = 1 ]; then
    echo "total to fetch: $(human "$need")"
    [ "${LINK[$target]}" = 1 ] && echo "then: ${DS4_FLASH_LINK:-$root/ds4flash.gguf} -> $dir/${files%% *}"
    exit 0
fi

mkdir -p "$dir"
free=$(df -B1 --output=avail "$dir" | tail -1 | tr -d ' ')
if [ "$need" -gt "$free" ]; then
    die "$(human "$need") to fetch but $(human "$free") free in $dir (set DS4_GGUF_DIR or --dir elsewhere)"
fi

fetch() {
    local f=$1 out="$dir/$1" part="$dir/$1.part" url="$endpoint/$repo/resolve/main/$1" got
    if [ -f "$out" ]; then
        if [ "$(stat -c %s "$out")" = "${SIZE[$f]}" ]; then echo "already downloaded: $out"; return; fi
        die "$out exists with $(stat -c %s "$out") bytes, the hub says ${SIZE[$f]}: remove it to download again"
    fi
    if [ -f "$part" ] && [ "$(stat -c %s "$part")" -gt "${SIZE[$f]}" ]; then rm -f "$part"; fi
    if [ -f "$part" ] && [ "$(stat -c %s "$part")" = "${SIZE[$f]}" ]; then
        :  # complete but not yet checked (a run stopped before the check)
    else
        if [ -f "$part" ]; then echo "resuming $f at $(human "$(stat -c %s "$part")")"
        else echo "downloading $f ($(human "${SIZE[$f]}"))"; fi
        if ! curl -fL -C - "${auth[@]}" -o "$part" "$url"; then
            die "$f: the download stopped; run the same command again to resume it"
        fi
    fi
    got=$(stat -c %s "$part")
    [ "$got" = "${SIZE[$f]}" ] || die "$f: $got bytes, the hub says ${SIZE[$f]}; run again to resume"
    echo "checking $f (SHA-256)"
    local sum
    sum=$(sha256sum "$part" | cut -d' ' -f1)
    if [ "$sum" != "${SHA[$f]}" ]; then
        rm -f "$part"
        die "$f: SHA-256 $sum, the hub says ${SHA[$f]}; the download was corrupt and is removed"
    fi
    mv "$part" "$out"
    echo "done: $out"
}

for f in $files; do fetch "$f"; done
if [ "${LINK[$target]}" = 1 ]; then
    link=${DS4_FLASH_LINK:-$root/ds4flash.gguf}
    ln -sfn "$dir/${files%% *}" "$link"
    echo "$link -> $dir/${files%% *}"
fi
