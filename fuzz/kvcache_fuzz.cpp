// libFuzzer target for the disk KV cache file reader (kvcache/file_format.h,
// docs/KV_CACHE_FORMAT.md): any byte string must read or throw FormatError -- never crash,
// overread or allocate more than its own size.
//
// Each input is read twice: as it is (the checksums stop most mutations), and with its header
// checksum, text hash, tool-map hash and file checksum recomputed from the sizes the header
// declares, so that mutations reach the size checks and the tool-map parser. The expected model
// id is bytes 1..16 and the payload version 7, as fuzz/make_kvcache_corpus.py writes them.
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kvcache/file_format.h"

namespace {

using namespace ds4::kvcache;

uint64_t u64_at(const std::vector<uint8_t>& b, size_t at) {
    uint64_t v;
    std::memcpy(&v, b.data() + at, 8);
    return v;
}

void put64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

// Makes the hashes agree with the declared sizes where those fit in the input.
void fix_checksums(std::vector<uint8_t>& b) {
    if (b.size() < kHeaderBytes) return;
    const uint64_t t = u64_at(b, 64), p = u64_at(b, 88), m = u64_at(b, 96);
    const uint64_t n = b.size();
    if (t <= n && p <= n && m <= n && kHeaderBytes + t + p + m + kChecksumBytes <= n) {
        const TextHash th = text_hash({reinterpret_cast<const char*>(b.data() + kHeaderBytes), size_t(t)});
        std::memcpy(b.data() + 72, th.data(), 16);
        put64(b, 104, XXH3_64bits(b.data() + kHeaderBytes + t + p, size_t(m)));
    }
    put64(b, 112, XXH3_64bits(b.data(), 112));
    if (t <= n && p <= n && m <= n && kHeaderBytes + t + p + m + kChecksumBytes <= n) {
        const size_t end = size_t(kHeaderBytes + t + p + m);
        put64(b, end, XXH3_64bits(b.data(), end));
    }
}

void read_all(const std::vector<uint8_t>& b) {
    Expect expect;
    for (int i = 0; i < 16; ++i) expect.model_id[size_t(i)] = uint8_t(i + 1);
    expect.payload_version = 7;
    try {
        SpanSource src(b);
        const Header h = read_header(src, expect, "fuzz");
        read_tools(src, h, "fuzz");
        read_stats(src, h);
        const Entry e = read_entry(src, expect, "fuzz");
        // What read is consistent with its header.
        if (e.text.size() != h.text_bytes || e.payload.size() != h.payload_bytes ||
            h.file_bytes() != b.size() || text_hash(e.text) != h.text_hash)
            __builtin_trap();
    } catch (const FormatError&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<uint8_t> bytes(data, data + size);
    read_all(bytes);
    fix_checksums(bytes);
    read_all(bytes);
    return 0;
}
