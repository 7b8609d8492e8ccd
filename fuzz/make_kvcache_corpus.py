#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/kvcache_fuzz.cpp into fuzz/corpus/kvcache/: disk KV cache
files in the byte format of docs/KV_CACHE_FORMAT.md for model id bytes 1..16 and payload
version 7, with every hash left ZERO (the target recomputes them from the declared sizes):
empty and non-empty texts, payloads and tool maps, every save reason.

  fuzz/make_kvcache_corpus.py [OUT_DIR]
"""
import os
import struct
import sys

MODEL = bytes(range(1, 17))


def kv_file(text, payload, tools, reason=1, tokens=3, ctx=4096):
    tm = struct.pack("<I", len(tools))
    for i, d in tools:
        tm += struct.pack("<II", len(i), len(d)) + i + d
    header = (b"DS4KVCAC" + struct.pack("<IIII", 1, reason, 0, 7) + MODEL +
              struct.pack("<QQQQ", tokens, ctx, 1700000000, len(text)) + bytes(16) +
              struct.pack("<QQQQ", len(payload), len(tm), 0, 0))
    assert len(header) == 120
    stats = struct.pack("<IQQ", 2, 1700000100, 0)
    return header + text + payload + tm + bytes(8) + stats


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "kvcache")
    os.makedirs(out, exist_ok=True)
    dsml = "<｜DSML｜invoke name=\"get\">x</｜DSML｜invoke>".encode()
    seeds = {
        "empty": kv_file(b"", b"", []),
        "text_only": kv_file(b"<\xef\xbd\x9cUser\xef\xbd\x9c>hi", b"", [], reason=0),
        "payload": kv_file(b"abc", bytes(range(64)), [], reason=2),
        "tools": kv_file(b"prompt", b"\x01\x02\x03", [(b"call_0", dsml), (b"toolu_1", b"")], reason=3),
        "many_tools": kv_file(b"t", b"", [(b"id%d" % i, b"d" * i) for i in range(12)], reason=4),
        "manual": kv_file(b"x" * 40, b"\xff" * 33, [(b"", b"")], reason=5, tokens=0, ctx=0),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name + ".kv"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
