#!/usr/bin/env python3
"""Writes the seed corpus for fuzz_gguf into fuzz/corpus/gguf/.

Small GGUF images built field by field from the format description (independently of our
C++ writer): valid files that cover every value type, several tensor types and alignments,
and broken variants of them. Re-running overwrites the seeds with identical bytes; inputs the
fuzzer found (crash-*.gguf, kept after the fix) are left alone.
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "gguf")

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
       BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
# (values per block, bytes per block) of the tensor types used below
GEOM = {0: (1, 4), 1: (1, 2), 8: (32, 34), 10: (256, 84), 16: (256, 66), 30: (1, 2), 39: (32, 17)}


def s(x):
    b = x.encode() if isinstance(x, str) else x
    return struct.pack("<Q", len(b)) + b


def scalar(t, v):
    return s(v) if t == STR else struct.pack(FMT[t], v)


def value(t, v):
    if t == ARR:
        et, elems = v
        return struct.pack("<IIQ", ARR, et, len(elems)) + b"".join(scalar(et, e) for e in elems)
    return struct.pack("<I", t) + scalar(t, v)


def gguf(kvs, tensors, alignment=32, version=3):
    """kvs: [(key, type, value)]; tensors: [(name, type_id, ne list)]."""
    if alignment != 32:
        kvs = kvs + [("general.alignment", U32, alignment)]
    head = struct.pack("<IIQQ", 0x46554747, version, len(tensors), len(kvs))
    head += b"".join(s(k) + value(t, v) for k, t, v in kvs)
    data, offset = b"", 0
    for name, tid, ne in tensors:
        per, nb = GEOM[tid]
        n = 1
        for d in ne:
            n *= d
        size = n // per * nb
        head += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", tid, offset)
        blob = bytes((i * 7 + tid) & 0xFF for i in range(size))
        data += blob + b"\0" * (-(len(data) + size) % alignment)
        offset = len(data)
    head += b"\0" * (-len(head) % alignment)
    return head + data


def patch(img, at, fmt, v):
    b = bytearray(img)
    struct.pack_into(fmt, b, at, v)
    return bytes(b)


def main():
    os.makedirs(OUT, exist_ok=True)
    every = [
        ("u8", U8, 255), ("i8", I8, -1), ("u16", U16, 65535), ("i16", I16, -2),
        ("u32", U32, 7), ("i32", I32, -7), ("f32", F32, 0.5), ("bool", BOOL, 1),
        ("str", STR, "deepseek4"), ("u64", U64, 2**64 - 1), ("i64", I64, -2**63),
        ("f64", F64, 1e300),
        ("a.i32", ARR, (I32, [1, 2, 3])), ("a.str", ARR, (STR, ["a", "", "bc"])),
        ("a.f32", ARR, (F32, [1.0, -1.0])), ("a.bool", ARR, (BOOL, [0, 1])),
        ("a.u8", ARR, (U8, [])),
    ]
    tiny = gguf([("general.architecture", STR, "deepseek4")], [("t", 0, [4])])
    seeds = {
        "valid_tiny.gguf": tiny,
        "valid_every_value.gguf": gguf(every, []),
        "valid_tensor_types.gguf": gguf(
            [("n", U32, 1)],
            [("f32", 0, [3]), ("f16", 1, [8, 2]), ("bf16", 30, [2, 1, 1]), ("q8", 8, [64]),
             ("q2k", 10, [256]), ("iq2", 16, [256]), ("mx", 39, [32, 1, 1, 2])]),
        "valid_align64.gguf": gguf([("k", STR, "v")], [("a", 0, [3]), ("b", 8, [32])], 64),
        "valid_align1.gguf": gguf([], [("a", 1, [3]), ("b", 0, [1])], 1),
        "valid_v2.gguf": gguf([("k", U8, 1)], [("t", 0, [1])], version=2),
        "valid_empty.gguf": struct.pack("<IIQQ", 0x46554747, 3, 0, 0),
        "broken_truncated.gguf": tiny[:60],
        "broken_magic.gguf": b"GGML" + tiny[4:],
        "broken_version1.gguf": patch(tiny, 4, "<I", 1),
        "broken_kv_count.gguf": patch(tiny, 16, "<Q", 2**62),
        "broken_nested_array.gguf": gguf([("n", ARR, (U8, [1]))], []).replace(
            struct.pack("<II", ARR, U8), struct.pack("<II", ARR, ARR)),
        "broken_alignment3.gguf": gguf([("general.alignment", U32, 3)], [("t", 0, [1])]),
        "broken_overlap.gguf": gguf([], [("a", 0, [16]), ("b", 0, [16])]).replace(
            struct.pack("<IQ", 0, 64), struct.pack("<IQ", 0, 32)),
        "broken_unknown_type.gguf": patch(tiny, tiny.rindex(s("t")) + 9 + 4 + 8, "<I", 31),
    }
    total = 0
    for name, data in sorted(seeds.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        total += len(data)
    print(f"wrote {len(seeds)} seeds, {total} bytes, to {OUT}")


if __name__ == "__main__":
    main()
