// libFuzzer target for the pipeline wire protocol (dist/protocol.h, docs/DISTRIBUTED.md): the
// input is a byte stream as it would arrive on a socket. Any stream must split into frames and
// decode, or throw ProtocolError -- never crash, overread or allocate beyond its own size (the
// reader's bound is 64 KiB here).
//
// Checked on every input:
//   - the frames (or the error) do not depend on how the stream is cut into feed() calls;
//   - a frame that decodes re-encodes to exactly its own bytes (the codec is canonical);
//   - every decoder, run on the raw input as a payload, decodes or throws ProtocolError.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include "dist/protocol.h"

namespace {

using namespace ds4::dist;

constexpr uint32_t kMaxPayload = 64 * 1024;

struct Outcome {
    std::vector<Frame> frames;
    bool failed = false;
    size_t pending = 0;
};

Outcome read_stream(std::span<const uint8_t> in, bool split) {
    Outcome o;
    FrameReader r(kMaxPayload);
    uint32_t state = static_cast<uint32_t>(in.size()) * 2654435761u + 1;
    try {
        size_t at = 0;
        while (at < in.size()) {
            size_t n = in.size() - at;
            if (split) {
                state = state * 1664525u + 1013904223u;
                n = std::min(n, size_t(1 + (state >> 24) % 13));
            }
            for (Frame& f : r.feed(in.subspan(at, n))) o.frames.push_back(std::move(f));
            at += n;
        }
    } catch (const ProtocolError&) {
        o.failed = true;
    }
    o.pending = r.pending();
    return o;
}

void check_canonical(const Frame& f) {
    std::optional<Message> m;
    try {
        m = decode(f);
    } catch (const ProtocolError&) {
        return;
    }
    const std::vector<uint8_t> again = std::visit([](const auto& x) { return encode(x); }, *m);
    if (again.size() != kHeaderBytes + f.payload.size()) __builtin_trap();
    if (static_cast<uint32_t>(again[7]) != static_cast<uint32_t>(f.type)) __builtin_trap();
    if (!std::equal(f.payload.begin(), f.payload.end(), again.begin() + kHeaderBytes)) __builtin_trap();
}

template <class F>
void try_decode(F&& f) {
    try {
        f();
    } catch (const ProtocolError&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> in(data, size);
    const Outcome whole = read_stream(in, false);
    const Outcome pieces = read_stream(in, true);
    // The frames that complete before an error may differ only by the frames of the last
    // feed() call, which the throw discards; without an error they must agree exactly.
    if (whole.failed != pieces.failed) __builtin_trap();
    if (!whole.failed) {
        if (whole.frames.size() != pieces.frames.size() || whole.pending != pieces.pending) __builtin_trap();
        for (size_t i = 0; i < whole.frames.size(); ++i)
            if (whole.frames[i].type != pieces.frames[i].type || whole.frames[i].payload != pieces.frames[i].payload)
                __builtin_trap();
    }
    for (const Frame& f : pieces.frames) check_canonical(f);

    try_decode([&] { decode_hello(in); });
    try_decode([&] { decode_error(in); });
    try_decode([&] { decode_work(in); });
    try_decode([&] { decode_result(in); });
    try_decode([&] { decode_snapshot_save_req(in); });
    try_decode([&] { decode_snapshot_begin(in); });
    try_decode([&] { decode_snapshot_chunk(in); });
    try_decode([&] { decode_snapshot_done(in); });
    try_decode([&] { decode_snapshot_load_begin(in); });
    return 0;
}
