#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/dist_frame_fuzz.cpp into fuzz/corpus/dist_frame/: byte streams
of the pipeline wire protocol (docs/DISTRIBUTED.md, PRODUCT.md §7.2) built field by field from
the frame table, independently of our C++ encoder: a valid frame of each of the nine types (some
types twice) and of our IDENTITY (64), the IDENTIFY probe and its two answers, streams of several
frames, and a few broken ones. Re-running rewrites the seeds
with identical bytes; inputs the fuzzer found (crash-*, kept after the fix) are left alone.

  fuzz/make_dist_corpus.py [OUT_DIR]
"""
import os
import struct
import sys

MAGIC = 0x44533444


def u32(*vs):
    return struct.pack(">" + "I" * len(vs), *[v & 0xFFFFFFFF for v in vs])


def u64(v):
    return u32(v >> 32, v)


def frame(typ, payload):
    return u32(MAGIC, typ, len(payload)) + payload


def tokens(ts):
    return b"".join(u32(t) for t in ts)


def hello(name=b"deepseek-v4-flash", start=22, end=42, out=1, hidden=1, port=7001, model_id=3, quant_bits=4):
    return frame(1, u32(model_id, quant_bits, start, end, out, hidden, 65536, 43, port, len(name)) + name)


def route(entries, ret=True):
    b = b""
    for host, port, start, end, flags in entries:
        b += u32(len(host), port, start, end, flags) + host
    if ret:
        b += u32(1, 0, 0)
    return b


def work(toks, hc=b"", bits=0, flags=0, entries=(), ret=True, index=0, pos0=0, draft=b"", model_id=3):
    blob = route(entries, ret) if entries or ret else b""
    fixed = (u32(model_id) + u64(0x0123456789ABCDEF) + u64(77) + u64(0x1111222233334444) + u64(0x5555666677778888) +
             u32(pos0, len(toks), 0, 20, flags, 4 * len(toks), len(hc), bits, len(entries), index, len(blob)))
    return frame(3, fixed + tokens(toks) + hc + blob + draft)


def batch(items):
    return u32(1, len(items)) + b"".join(u64(s) + u64(p) + u64(r) + u32(pos0, n, flags)
                                         for s, p, r, pos0, n, flags in items)


def identity_v2(features, n_layers=43, arch=b"deepseek4"):
    return frame(64, u32(2, n_layers, len(arch), features) + bytes(range(16)) + arch)


def draft_request(hidden_from, hidden, layers):
    return u32(1, hidden_from, hidden, len(layers)) + u32(*layers)


def draft_rows(rows, bits, hidden, layers, captured):
    return u32(1, rows, bits, len(hidden), len(layers), len(captured)) + u32(*layers) + hidden + captured


def telemetry(*vs):
    return u32(*vs)


def result(kind, bits, payload, tele=(), draft=b"", status=0):
    t = b"".join(tele)
    return frame(4, u64(77) + u64(0xE743DA0EA4B4B930) + u32(status, kind, len(tele), len(t), len(payload), bits) + t +
                 payload + draft)


def identity(arch=b"deepseek4", n_layers=43, version=1, arch_len=None):
    # IDENTITY (64, ours): version, n_layers, arch_len, the 16-byte metadata hash, the name.
    return frame(64, u32(version, n_layers, len(arch) if arch_len is None else arch_len) + bytes(range(0xA0, 0xB0)) +
                 arch)


def save_req_fields(count=3):
    return u32(3) + u64(0xAAAABBBBCCCCDDDD) + u64(78) + u64(0x14650FB0739D0383) + u32(count, 0, 20)


def begin(typ, toks, message=b"", payload=0x123456789, status=0):
    return frame(typ, save_req_fields(len(toks)) + u64(payload) + u32(status, 4 * len(toks), len(message)) +
                 tokens(toks) + message)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "dist_frame")
    os.makedirs(out, exist_ok=True)
    two_hops = [(b"10.0.0.2", 7001, 10, 20, 0), (b"worker-c.local", 7002, 21, 42, 1)]
    seeds = {
        "hello.bin": hello(),
        "hello_no_output.bin": hello(b"x", 0, 21, 0, 1, 65535),
        "error.bin": frame(2, b"worker KV prefix hash mismatch"),
        "error_empty.bin": frame(2, b""),
        "work_hc16.bin": work([7, -1, 256], bytes(range(48)), 16, 0x3, two_hops),
        "work_tokens_only.bin": work([1], flags=0xC, ret=False),
        "work_hc8_one_hop.bin": work([5, 6], bytes(8), 8, 0x1, two_hops[1:], pos0=100),
        "result_logits.bin": result(2, 32, bytes(range(64)),
                                    [telemetry(10, 20, 0, 16, 3, 1500, 20000, 35, 192, 48),
                                     telemetry(21, 42, 1, 16, 3, 1800, 0, 0, 48, 512)]),
        "result_ack.bin": result(0, 0, b""),
        "result_hidden8.bin": result(1, 8, bytes(33)),
        # Ours (issue 31): a WORK's draft request (flag 0x40) and a RESULT's draft rows (kind bit
        # 0x100): a verification step's logits with the final hidden state of 2 rows (4 values
        # of 16 bits each) and the captures of layers 41 and 42; a prompt piece's ACK with the
        # captures of one layer at 8 bits.
        "work_draft.bin": work([7, 8, 9], bytes(range(24)), 16, 0x43, two_hops, draft=draft_request(1, 1, [40, 41, 42])),
        "result_draft.bin": result(0x102, 32, bytes(range(24)), [telemetry(21, 42, 1, 16, 3, 1800, 0, 0, 48, 512)],
                                   draft_rows(2, 16, bytes(range(16)), [41, 42], bytes(range(100, 132)))),
        "result_ack_draft.bin": result(0x100, 0, b"", draft=draft_rows(3, 8, b"", [40], bytes(range(12)))),
        # Ours (issue 33): a batched WORK (flag 0x100) of three sessions' rows (1 + 2 + 1 tokens,
        # item 0 repeating the fixed record), the first with its last row's logits, the third
        # with every row's; and the IDENTITY version 2 that offers it.
        "work_batch.bin": work([7, 8, 9, 10], bytes(range(16)), 16, 0x103, two_hops, pos0=5,
                               draft=batch([(0x0123456789ABCDEF, 0x1111222233334444, 0x5555666677778888, 5, 1, 0x2),
                                            (0x42, 0xAAAA, 0xBBBB, 0, 2, 0),
                                            (0x43, 0xCCCC, 0xDDDD, 9, 1, 0x12)])),
        "identity_v2.bin": identity_v2(1),
        "snapshot_save_req.bin": frame(5, save_req_fields()),
        "snapshot_begin.bin": begin(6, [1, 2, -3], b"ok"),
        "snapshot_chunk.bin": frame(7, u64(78) + u32(100) + bytes(range(100))),
        "snapshot_done.bin": frame(8, u64(78) + u32(5, 9) + b"disk full"),
        "snapshot_load_begin.bin": begin(9, [4, 5]),
        # The extension negotiation (issue 38): the IDENTIFY probe our coordinator sends after a
        # HELLO of upstream's shape (WORK flag 0x80, model id 0 = Flash, one token, no route),
        # our worker's IDENTITY answer (type 64), upstream's refusal (a RESULT of status 1, kind
        # ACK, its message as payload), and the whole exchange as one stream.
        "work_identify.bin": work([0], flags=0x80, ret=False, model_id=0),
        "identity.bin": identity(),
        "result_identify_refused.bin": result(0, 0, b"invalid distributed WORK flags", status=1),
        "stream_identify.bin": (hello(b"DeepSeek V4 Flash", 21, 42, model_id=0, quant_bits=2) +
                                work([0], flags=0x80, ret=False, model_id=0) + identity()),
        # Broken: an IDENTITY of another version, one whose name is longer than arch_len says.
        "identity_bad_version.bin": identity(version=2),
        "identity_bad_arch_len.bin": identity(arch_len=4),
        # Broken: bad magic, a type out of range, token_bytes that disagree, a truncated frame.
        "bad_magic.bin": u32(0x44533445, 2, 1) + b"x",
        "bad_type.bin": u32(MAGIC, 10, 0),
        "truncated.bin": hello()[:-3],
    }
    bad_tokens = bytearray(work([1, 2]))
    bad_tokens[12 + 4 * 14:12 + 4 * 15] = u32(12)
    seeds["work_bad_token_bytes.bin"] = bytes(bad_tokens)
    seeds["stream.bin"] = (hello() + work([7, 8], bytes(16), 32, 0x1, two_hops) + result(0, 0, b"") +
                           frame(7, u64(1) + u32(0)) + frame(8, u64(1) + u32(0, 0)))
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
