#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/state_fuzz.cpp into fuzz/corpus/state/: valid states of the
target's small configuration (3 layers, ratios 0, 4, 128; window 4, head_dim 8, indexer_dim 8)
in the byte format of docs/STATE_FORMAT.md, WITHOUT the trailing checksum (the target appends
it), at positions around the window and the compressors' windows, with and without logits,
for the whole model and for layer ranges, and with a drafter section (flag bit 1).

  fuzz/make_state_corpus.py [OUT_DIR]
"""
import os
import struct
import sys

RATIOS = [0, 4, 128]
WINDOW, HEAD_DIM, INDEXER_DIM = 4, 8, 8


def floats(n, seed):
    return b"".join(struct.pack("<f", ((i * 7 + seed) % 13) / 4.0 - 1.5) for i in range(n))


def first_needed(n, ratio):
    open_ = n // ratio * ratio
    return max(0, open_ - ratio) if ratio == 4 else open_


def compressor(pos, ratio, width, seed):
    coff = 2 if ratio == 4 else 1
    first = first_needed(pos, ratio)
    rows = pos - first
    return (struct.pack("<QQ", pos, first) + floats(rows * coff * width, seed) +
            floats(rows * coff * width, seed + 1))


def section(layer, pos):
    ratio = RATIOS[layer]
    body = struct.pack("<I", ratio)
    n_raw = min(pos, WINDOW)
    body += struct.pack("<Q", n_raw) + floats(n_raw * HEAD_DIM, layer)
    if ratio:
        n = pos // ratio
        body += struct.pack("<Q", n) + floats(n * HEAD_DIM, layer + 1) + compressor(pos, ratio, HEAD_DIM, 3)
    if ratio == 4:
        n = pos // 4
        body += struct.pack("<Q", n) + floats(n * INDEXER_DIM, layer + 2) + compressor(pos, 4, INDEXER_DIM, 5)
    return struct.pack("<I", layer) + bytes(16) + struct.pack("<Q", len(body)) + body


def drafter(kind, body):
    return struct.pack("<I", 1) + kind.ljust(16, b"\0") + struct.pack("<Q", len(body)) + body


def state(pos, first, last, output, logits, draft=b""):
    out = b"DS4STATE" + struct.pack("<II", 1, (1 if logits else 0) | (2 if draft else 0))
    out += b"deepseek4".ljust(16, b"\0") + bytes(16)
    out += struct.pack("<IIII", 3, first, last, 1 if output else 0)
    out += struct.pack("<QI", 1024, 1) + struct.pack("<Q", pos)
    out += b"".join(struct.pack("<I", (t * 31) % 500) for t in range(pos))
    if logits:
        out += struct.pack("<Q", 16) + floats(16, 9)
    for layer in range(first, last + 1):
        out += section(layer, pos)
    return out + draft


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "state")
    os.makedirs(out, exist_ok=True)
    cases = {
        "empty": state(0, 0, 2, True, False),
        "one": state(1, 0, 2, True, True),
        "window": state(5, 0, 2, True, False),
        "ratio4_open": state(9, 0, 2, True, True),
        "ratio128_row": state(130, 0, 2, True, False),
        "range_first": state(9, 0, 1, False, False),
        "range_last": state(130, 2, 2, True, True),
        "drafter": state(5, 0, 2, True, True, drafter(b"mtp", struct.pack("<IqqQ", 1, 8, 4, 1) + bytes(4) + floats(8, 2))),
    }
    for name, data in cases.items():
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
