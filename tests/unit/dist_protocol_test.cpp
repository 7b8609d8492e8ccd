// The pipeline wire protocol codec (src/dist/protocol.h, PRODUCT.md §7.2): every frame type
// round-trips through FrameReader however the bytes are split; each declared length that does
// not match is rejected with a message naming it; the payload bound is checked on the header;
// a partial frame waits for more bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "dist/protocol.h"

namespace {

using namespace ds4::dist;
using Bytes = std::vector<uint8_t>;

Hello sample_hello() {
    Hello h;
    h.model_id = 0xA1B2C3D4;
    h.quant_bits = 4;
    h.layer_start = 22;
    h.layer_end = 42;
    h.has_output = true;
    h.has_hidden = true;
    h.ctx_size = 65536;
    h.n_layers = 43;
    h.listen_port = 7001;
    h.model_name = "deepseek-v4-flash";
    return h;
}

Work sample_work() {
    Work w;
    w.model_id = 3;
    w.session_id = 0x0123456789ABCDEFull;
    w.request_id = 0xFEDCBA9876543210ull;
    w.pos0 = 16;
    w.tokens = {7, -1, 256};
    w.prefix_hash = 0x1111222233334444ull;
    w.result_hash = token_hash(w.prefix_hash, w.tokens);
    w.layer_start = 10;
    w.layer_end = 20;
    w.flags = kWorkInputHc | kWorkOutputLogits;
    w.input_hc_bits = 16;
    w.input_hc.resize(3 * 8 * 2);  // 3 tokens x 8 values x 2 bytes
    for (size_t i = 0; i < w.input_hc.size(); ++i) w.input_hc[i] = uint8_t(i * 7 + 1);
    w.route = {{"10.0.0.2", 7001, 10, 20, 0}, {"worker-c.local", 7002, 21, 42, kRouteOutputLogits}};
    w.route_return = RouteReturn{kRouteReturnUpstream, "", 0};
    w.route_index = 0;
    return w;
}

Result sample_result() {
    Result r;
    r.request_id = 0xFEDCBA9876543210ull;
    r.result_hash = 0xE743DA0EA4B4B930ull;
    r.status = 0;
    r.kind = ResultKind::logits;
    r.payload_bits = 32;
    r.telemetry = {{10, 20, 0, 16, 3, 1500, 20000, 35, 192, 48}, {21, 42, 1, 16, 3, 1800, 0, 0, 48, 512}};
    r.payload.resize(128);
    for (size_t i = 0; i < r.payload.size(); ++i) r.payload[i] = uint8_t(255 - i);
    return r;
}

SnapshotSaveReq sample_save_req() {
    return {5, 0xAAAABBBBCCCCDDDDull, 77, 0x14650FB0739D0383ull, 3, 0, 20};
}

SnapshotBegin sample_begin() {
    SnapshotBegin b;
    b.req = sample_save_req();
    b.payload_bytes = 0x123456789ull;  // over 4 GiB: the hi half matters
    b.status = 0;
    b.tokens = {1, 2, -3};
    b.message = "ok";
    return b;
}

std::vector<Message> samples() {
    std::vector<Message> m;
    m.emplace_back(sample_hello());
    m.emplace_back(ErrorFrame{"worker KV prefix hash mismatch"});
    m.emplace_back(ErrorFrame{""});
    m.emplace_back(sample_work());
    Work plain = sample_work();  // first hop from a coordinator with no layers: tokens only
    plain.flags = kWorkResetSession | kWorkAckOnly;
    plain.input_hc.clear();
    plain.input_hc_bits = 0;
    plain.route.clear();
    plain.route_return.reset();
    m.emplace_back(plain);
    m.emplace_back(sample_result());
    Result ack;
    ack.request_id = 9;
    m.emplace_back(ack);
    Result hidden = sample_result();
    hidden.kind = ResultKind::hidden_state;
    hidden.payload_bits = 8;
    hidden.payload.resize(33);
    hidden.telemetry.clear();
    m.emplace_back(hidden);
    m.emplace_back(sample_save_req());
    m.emplace_back(sample_begin());
    m.emplace_back(SnapshotChunk{42, Bytes(1000, 0x5A)});
    m.emplace_back(SnapshotChunk{43, {}});
    m.emplace_back(SnapshotDone{42, 0, "saved"});
    SnapshotLoadBegin load;
    static_cast<SnapshotBegin&>(load) = sample_begin();
    load.message.clear();
    m.emplace_back(load);
    return m;
}

Bytes encode_any(const Message& m) {
    return std::visit([](const auto& x) { return encode(x); }, m);
}

uint32_t be32(const Bytes& b, size_t at) {
    return uint32_t(b[at]) << 24 | uint32_t(b[at + 1]) << 16 | uint32_t(b[at + 2]) << 8 | uint32_t(b[at + 3]);
}

void put_be32(Bytes& b, size_t at, uint32_t v) {
    b[at] = uint8_t(v >> 24);
    b[at + 1] = uint8_t(v >> 16);
    b[at + 2] = uint8_t(v >> 8);
    b[at + 3] = uint8_t(v);
}

// Sets u32 field `index` of the fixed record (the payload starts after the 12-byte header).
Bytes patch(Bytes frame, size_t index, uint32_t v) {
    put_be32(frame, kHeaderBytes + 4 * index, v);
    return frame;
}

// Sets the header's u32 at byte `at` (4: type, 8: payload bytes).
Bytes set_header(Bytes frame, size_t at, uint32_t v) {
    put_be32(frame, at, v);
    return frame;
}

// Appends bytes to the payload and fixes the header's size.
Bytes append(Bytes frame, size_t n) {
    frame.insert(frame.end(), n, 0x41);
    put_be32(frame, 8, uint32_t(frame.size() - kHeaderBytes));
    return frame;
}

std::vector<Frame> read_all(const Bytes& stream, uint32_t max_payload = kDefaultMaxPayload) {
    FrameReader r(max_payload);
    auto frames = r.feed(stream);
    EXPECT_EQ(r.pending(), 0u);
    return frames;
}

// The frame must pass the reader (and its header checks) and fail its decoder with `what`.
void expect_bad(const Bytes& frame, const std::string& what) {
    SCOPED_TRACE(what);
    std::vector<Frame> frames;
    try {
        frames = read_all(frame);
        ASSERT_EQ(frames.size(), 1u);
        decode(frames[0]);
        ADD_FAILURE() << "accepted a bad frame";
    } catch (const ProtocolError& e) {
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
}

TEST(DistProtocol, TokenHashMatchesIndependentFnv1a) {
    // python3 -c "import struct
    // def h(p,ts):
    //   for t in ts:
    //     for b in struct.pack('<i',t): p^=b; p=(p*1099511628211)%2**64
    //   return p
    // B=1469598103934665603; print(hex(h(B,[1,2,3,99])), hex(h(B,[0])), hex(h(B,[7,-1,256])))"
    EXPECT_EQ(token_hash(kTokenHashInit, {}), 0x14650FB0739D0383ull);
    const std::vector<int32_t> a{1, 2, 3, 99};
    EXPECT_EQ(token_hash(kTokenHashInit, a), 0xE743DA0EA4B4B930ull);
    const std::vector<int32_t> z{0};
    EXPECT_EQ(token_hash(kTokenHashInit, z), 0x315446A086A23133ull);
    const std::vector<int32_t> neg{7, -1, 256};
    EXPECT_EQ(token_hash(kTokenHashInit, neg), 0x1956615CE9A2100Bull);
    // Chained: the hash of [1,2] continued over [3,99] is the hash of the whole transcript.
    const std::vector<int32_t> head{1, 2}, tail{3, 99};
    EXPECT_EQ(token_hash(token_hash(kTokenHashInit, head), tail), 0xE743DA0EA4B4B930ull);
}

TEST(DistProtocol, HeaderIsBigEndianMagicTypeBytes) {
    const Bytes f = encode(SnapshotDone{1, 2, "abc"});
    ASSERT_EQ(f.size(), kHeaderBytes + kSnapshotDoneFixedBytes + 3);
    EXPECT_EQ((Bytes{f.begin(), f.begin() + 4}), (Bytes{'D', 'S', '4', 'D'}));
    EXPECT_EQ(be32(f, 4), 8u);
    EXPECT_EQ(be32(f, 8), kSnapshotDoneFixedBytes + 3);
    EXPECT_EQ(be32(f, 12), 0u);  // request hi
    EXPECT_EQ(be32(f, 16), 1u);  // request lo
    // WORK: 64-bit values as hi, lo; tokens as big-endian u32.
    const Work w = sample_work();
    const Bytes wf = encode(w);
    EXPECT_EQ(be32(wf, 12 + 4 * 1), 0x01234567u);
    EXPECT_EQ(be32(wf, 12 + 4 * 2), 0x89ABCDEFu);
    EXPECT_EQ(be32(wf, 12 + 4 * 10), 3u);   // n_tokens
    EXPECT_EQ(be32(wf, 12 + 4 * 14), 12u);  // token_bytes
    EXPECT_EQ(be32(wf, 12 + kWorkFixedBytes + 4), 0xFFFFFFFFu);  // tokens[1] = -1
    EXPECT_EQ(be32(wf, 12 + kWorkFixedBytes + 8), 256u);
}

TEST(DistProtocol, EveryFrameRoundTripsWholeByteByByteAndInRandomSplits) {
    const std::vector<Message> msgs = samples();
    Bytes stream;
    for (const Message& m : msgs) {
        const Bytes f = encode_any(m);
        stream.insert(stream.end(), f.begin(), f.end());
        // Alone, in one piece.
        const auto one = read_all(f);
        ASSERT_EQ(one.size(), 1u);
        EXPECT_EQ(decode(one[0]), m) << frame_type_name(one[0].type);
        // Byte by byte: nothing until the last byte.
        FrameReader r;
        for (size_t i = 0; i < f.size(); ++i) {
            auto got = r.feed(std::span<const uint8_t>(&f[i], 1));
            if (i + 1 < f.size()) {
                ASSERT_TRUE(got.empty());
                EXPECT_EQ(r.pending(), i + 1);
            } else {
                ASSERT_EQ(got.size(), 1u);
                EXPECT_EQ(decode(got[0]), m);
            }
        }
    }
    // The whole stream in random pieces, several times.
    std::mt19937 rng(1234);
    for (int trial = 0; trial < 20; ++trial) {
        FrameReader r;
        std::vector<Frame> frames;
        size_t at = 0;
        while (at < stream.size()) {
            const size_t n = std::min(stream.size() - at, size_t(rng() % 97));
            auto got = r.feed(std::span<const uint8_t>(stream.data() + at, n));
            for (auto& f : got) frames.push_back(std::move(f));
            at += n;
        }
        ASSERT_EQ(frames.size(), msgs.size());
        for (size_t i = 0; i < msgs.size(); ++i) EXPECT_EQ(decode(frames[i]), msgs[i]) << i;
        EXPECT_EQ(r.pending(), 0u);
    }
}

TEST(DistProtocol, TruncatedStreamWaitsForMoreBytes) {
    const Bytes f = encode(sample_work());
    for (size_t cut : {size_t(0), size_t(5), kHeaderBytes, kHeaderBytes + 1, f.size() - 1}) {
        FrameReader r;
        EXPECT_TRUE(r.feed(std::span<const uint8_t>(f.data(), cut)).empty()) << cut;
        EXPECT_EQ(r.pending(), cut);
        const auto got = r.feed(std::span<const uint8_t>(f.data() + cut, f.size() - cut));
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(decode_work(got[0].payload), sample_work());
    }
}

TEST(DistProtocol, HeaderErrors) {
    auto expect_header = [](const Bytes& b, uint32_t max, const std::string& what) {
        SCOPED_TRACE(what);
        FrameReader r(max);
        try {
            r.feed(b);
            ADD_FAILURE() << "accepted";
        } catch (const ProtocolError& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
        // The stream is out of step now: later bytes are refused too.
        EXPECT_THROW(r.feed(encode(ErrorFrame{"x"})), ProtocolError);
    };
    Bytes f = encode(ErrorFrame{"hi"});
    Bytes bad_magic = f;
    bad_magic[3] = 'E';
    expect_header(bad_magic, kDefaultMaxPayload, "bad frame magic 0x44533445");
    expect_header(set_header(f, 4, 0), kDefaultMaxPayload, "unknown frame type 0");
    expect_header(set_header(f, 4, 10), kDefaultMaxPayload, "unknown frame type 10");
    expect_header(set_header(encode(sample_work()), 8, 79), kDefaultMaxPayload,
                  "WORK: declared payload of 79 bytes is shorter than its 80-byte fixed record");
    expect_header(set_header(encode(sample_save_req()), 8, 44), kDefaultMaxPayload,
                  "SNAPSHOT_SAVE_REQ: declared payload of 44 bytes, the record is 40");
}

TEST(DistProtocol, OversizedPayloadIsRejectedOnTheHeaderAlone) {
    // Only the 12 header bytes are fed: the reader must refuse on the declared size, holding
    // nothing of the payload (a successful check would have buffered or waited).
    Bytes h = encode(SnapshotChunk{1, Bytes(64, 1)});
    h.resize(kHeaderBytes);
    {
        FrameReader r(64);  // the frame needs 76
        try {
            r.feed(h);
            ADD_FAILURE() << "accepted";
        } catch (const ProtocolError& e) {
            EXPECT_NE(std::string(e.what()).find("declared payload of 76 bytes exceeds the maximum 64"),
                      std::string::npos)
                << e.what();
        }
    }
    {
        // 4 GiB - 1 declared, default bound: refused, not allocated.
        put_be32(h, 8, 0xFFFFFFFFu);
        FrameReader r;
        EXPECT_THROW(r.feed(h), ProtocolError);
    }
    {
        // Within the bound, the reader holds only what arrived, not the declared size.
        Bytes big = encode(SnapshotChunk{1, Bytes(kSnapshotChunkBytes, 2)});
        FrameReader r;
        EXPECT_TRUE(r.feed(std::span<const uint8_t>(big.data(), 100)).empty());
        EXPECT_EQ(r.pending(), 100u);
    }
    // An exact fit passes.
    const Bytes f = encode(SnapshotChunk{1, Bytes(64, 1)});
    EXPECT_EQ(read_all(f, 76).size(), 1u);
}

TEST(DistProtocol, HelloChecks) {
    const Bytes f = encode(sample_hello());
    expect_bad(patch(f, 9, 128), "model_name_len 128 exceeds 127");
    expect_bad(patch(f, 9, 16), "model_name_len declare 16 bytes after the fixed record, the payload has 17");
    expect_bad(append(f, 1), "model_name_len declare 17 bytes after the fixed record, the payload has 18");
    expect_bad(patch(f, 4, 2), "has_output is 2");
    expect_bad(patch(f, 5, 7), "has_hidden is 7");
    expect_bad(patch(f, 8, 70000), "listen_port 70000 is not a TCP port");
    Bytes nul = f;
    nul[kHeaderBytes + kHelloFixedBytes + 3] = 0;
    expect_bad(nul, "model name contains a NUL byte");
    Hello long_name = sample_hello();
    long_name.model_name.assign(128, 'x');
    EXPECT_THROW(encode(long_name), ProtocolError);
    long_name.model_name.assign(127, 'x');
    EXPECT_EQ(decode_hello(std::span<const uint8_t>(encode(long_name)).subspan(kHeaderBytes)), long_name);
}

TEST(DistProtocol, WorkChecks) {
    const Work w = sample_work();
    const Bytes f = encode(w);
    expect_bad(patch(f, 10, 0), "n_tokens is 0");
    expect_bad(patch(f, 14, 16), "token_bytes 16 is not 4 * n_tokens (3)");
    // 4 * 0x40000000 wraps to 0 in u32: must not pass as consistent.
    expect_bad(patch(patch(f, 10, 0x40000000u), 14, 0), "token_bytes 0 is not 4 * n_tokens (1073741824)");
    expect_bad(patch(patch(f, 9, 0xFFFFFFFEu), 10, 3), "pos0 4294967294 + n_tokens 3 overflows u32");
    expect_bad(patch(f, 13, 0x23), "unknown flags 0x23");
    expect_bad(patch(f, 16, 24), "input_hc_bits 24 is not 32, 16 or 8");
    expect_bad(patch(f, 15, 0), "INPUT_HC is set but input_hc_bytes is 0");
    // 48 bytes = 3 tokens x 8 values x 2 bytes; 50 is not a whole number of values per token.
    expect_bad(patch(f, 15, 50), "input_hc_bytes 50 is not a whole number of 16-bit values for 3 tokens");
    expect_bad(patch(f, 13, 0), "input_hc_bytes 48 without the INPUT_HC flag");
    expect_bad(patch(f, 18, 2), "route_index 2 out of range for route_count 2");
    // Declared variable parts vs the payload.
    expect_bad(patch(f, 19, be32(f, kHeaderBytes + 4 * 19) + 4),
               "token_bytes + input_hc_bytes + route_bytes declare");
    expect_bad(append(f, 3), "token_bytes + input_hc_bytes + route_bytes declare");
    expect_bad(patch(patch(f, 15, 0xFFFFFFF0u), 16, 8), "token_bytes + input_hc_bytes + route_bytes declare");

    // The route blob: it starts after the tokens and the hidden state.
    const size_t route_at = kHeaderBytes + kWorkFixedBytes + 4 * w.tokens.size() + w.input_hc.size();
    auto route_patch = [&](size_t field_byte, uint32_t v) {
        Bytes b = f;
        put_be32(b, route_at + field_byte, v);
        return b;
    };
    expect_bad(route_patch(0, 0), "entry 0 host_len 0 is not 1..255");
    expect_bad(route_patch(0, 300), "entry 0 host_len 300 is not 1..255");
    expect_bad(route_patch(0, 200), "host needs 200 bytes");
    expect_bad(route_patch(4, 0), "entry 0 has port 0");
    expect_bad(route_patch(4, 65536), "port 65536 is not a TCP port");
    expect_bad(route_patch(16, 2), "entry 0 has unknown flags 0x2");
    const size_t ret_at = 2 * kRouteFixedBytes + w.route[0].host.size() + w.route[1].host.size();
    expect_bad(route_patch(ret_at, 2), "unknown route-return kind 2");
    expect_bad(route_patch(ret_at + 4, 1), "route-return host needs 1 bytes");
    expect_bad(patch(f, 17, 3), "WORK route: layer_end needs 4 bytes");  // the return record read as a 3rd entry
    expect_bad(patch(f, 17, 0x10000000u), "route_count 268435456 needs at least");
    Bytes nul = f;
    nul[route_at + kRouteFixedBytes] = 0;
    expect_bad(nul, "host contains a NUL byte");
    // Trailing bytes after the return record (route_bytes and the header grown to cover them).
    Bytes trail = append(f, 4);
    put_be32(trail, kHeaderBytes + 4 * 19, be32(f, kHeaderBytes + 4 * 19) + 4);
    expect_bad(trail, "4 trailing bytes");

    // Encode refuses what the wire cannot say.
    Work bad = w;
    bad.input_hc.clear();
    EXPECT_THROW(encode(bad), ProtocolError);
    bad = w;
    bad.input_hc_bits = 12;
    EXPECT_THROW(encode(bad), ProtocolError);
    bad = w;
    bad.tokens.clear();
    EXPECT_THROW(encode(bad), ProtocolError);
    bad = w;
    bad.route[0].host.assign(256, 'h');
    EXPECT_THROW(encode(bad), ProtocolError);
}

TEST(DistProtocol, ResultChecks) {
    const Bytes f = encode(sample_result());
    expect_bad(patch(f, 5, 3), "unknown result_kind 3");
    expect_bad(patch(f, 7, 40), "telemetry_bytes 40 is not 40 * telemetry_count (2)");
    // 40 * 0x06666667 wraps to 24 in u32.
    expect_bad(patch(patch(f, 6, 0x06666667u), 7, 24), "telemetry_bytes 24 is not 40 * telemetry_count");
    expect_bad(patch(patch(f, 6, 3), 7, 120), "telemetry_bytes + payload_bytes declare 248 bytes after the fixed record, the payload has 208");
    expect_bad(patch(f, 8, 132), "telemetry_bytes + payload_bytes declare");
    expect_bad(append(f, 4), "telemetry_bytes + payload_bytes declare");
    expect_bad(patch(f, 9, 16), "logits payload_bits 16 is not 32");
    expect_bad(patch(f, 8, 126), "logits payload_bytes 126 is not a multiple of 4");
    expect_bad(patch(f, 5, 0), "an ACK with 128 payload bytes");
    expect_bad(patch(patch(f, 5, 1), 9, 0), "hidden-state payload_bits 0 is not 32, 16 or 8");
    expect_bad(patch(patch(patch(f, 5, 1), 9, 32), 8, 126), "payload_bytes 126 is not a whole number of 32-bit values");
}

TEST(DistProtocol, SnapshotChecks) {
    const Bytes b = encode(sample_begin());
    expect_bad(patch(b, 13, 16), "token_bytes 16 is not 4 * token_count (3)");
    expect_bad(patch(patch(b, 7, 0x40000000u), 13, 0), "token_bytes 0 is not 4 * token_count (1073741824)");
    expect_bad(patch(b, 14, 3), "token_bytes + message_bytes declare 15 bytes after the fixed record, the payload has 14");
    expect_bad(append(b, 1), "token_bytes + message_bytes declare");
    SnapshotLoadBegin load;
    static_cast<SnapshotBegin&>(load) = sample_begin();
    expect_bad(patch(encode(load), 14, 0), "SNAPSHOT_LOAD_BEGIN: token_bytes + message_bytes declare");

    const Bytes c = encode(SnapshotChunk{1, Bytes(10, 3)});
    expect_bad(patch(c, 2, 11), "chunk_bytes declare 11 bytes after the fixed record, the payload has 10");
    expect_bad(patch(c, 2, kSnapshotChunkBytes + 1), "chunk_bytes 8388609 exceeds 8388608");
    EXPECT_THROW(encode(SnapshotChunk{1, Bytes(kSnapshotChunkBytes + 1, 0)}), ProtocolError);

    const Bytes d = encode(SnapshotDone{1, 5, "disk full"});
    expect_bad(patch(d, 3, 10), "SNAPSHOT_DONE: message_bytes declare 10");
    expect_bad(patch(d, 3, 0xFFFFFFFFu), "message_bytes declare 4294967295");

    SnapshotBegin mismatch = sample_begin();
    mismatch.req.token_count = 4;
    EXPECT_THROW(encode(mismatch), ProtocolError);
}

// The seeds of fuzz/corpus/dist_frame are written field by field by fuzz/make_dist_corpus.py
// from the frame table, not by our encoder: every valid one must decode and re-encode to the
// same bytes, and the broken ones must fail.
TEST(DistProtocol, IndependentlyWrittenSeedsDecodeAndReencodeExactly) {
    const std::filesystem::path dir = std::filesystem::path(DS4_SOURCE_DIR) / "fuzz/corpus/dist_frame";
    size_t valid = 0, broken = 0;
    for (const char* name : {"hello.bin", "hello_no_output.bin", "error.bin", "error_empty.bin", "work_hc16.bin",
                             "work_tokens_only.bin", "work_hc8_one_hop.bin", "result_logits.bin", "result_ack.bin",
                             "result_hidden8.bin", "snapshot_save_req.bin", "snapshot_begin.bin",
                             "snapshot_chunk.bin", "snapshot_done.bin", "snapshot_load_begin.bin", "stream.bin"}) {
        SCOPED_TRACE(name);
        std::ifstream in(dir / name, std::ios::binary);
        ASSERT_TRUE(in) << "missing seed";
        const Bytes stream{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        Bytes again;
        for (const Frame& f : read_all(stream)) {
            const Bytes e = encode_any(decode(f));
            again.insert(again.end(), e.begin(), e.end());
        }
        EXPECT_EQ(again, stream);
        ++valid;
    }
    for (const char* name : {"bad_magic.bin", "bad_type.bin", "work_bad_token_bytes.bin"}) {
        SCOPED_TRACE(name);
        std::ifstream in(dir / name, std::ios::binary);
        ASSERT_TRUE(in) << "missing seed";
        const Bytes stream{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        EXPECT_THROW(
            {
                FrameReader r;
                for (const Frame& f : r.feed(stream)) decode(f);
            },
            ProtocolError);
        ++broken;
    }
    EXPECT_EQ(valid, 16u);
    EXPECT_EQ(broken, 3u);
}

}  // namespace

namespace {

using namespace ds4::dist;

// The draft seam over a pipeline (ours, issue 31): a WORK's draft request after the route blob
// and a RESULT's draft rows after its payload round-trip, and every declared count is checked
// against the bytes there before anything is allocated.
Work draft_work() {
    Work w = sample_work();
    w.flags |= kWorkDraftRows;
    w.draft = DraftRequest{1, true, {40, 41, 42}};
    return w;
}

Result draft_result() {
    Result r = sample_result();
    DraftRows d;
    d.rows = 2;
    d.bits = 16;
    d.hidden.resize(2 * 8 * 2);  // 2 rows x 8 values x 2 bytes
    d.layers = {41, 42};
    d.captured.resize(2 * d.hidden.size());
    for (size_t i = 0; i < d.captured.size(); ++i) d.captured[i] = uint8_t(i * 3 + 1);
    r.draft = d;
    return r;
}

TEST(DistProtocol, DraftRequestsAndDraftRowsRoundTrip) {
    for (const Message& m : {Message(draft_work()), Message(draft_result())}) {
        const Bytes f = encode_any(m);
        FrameReader r;
        const auto frames = r.feed(f);
        ASSERT_EQ(frames.size(), 1u);
        EXPECT_EQ(decode(frames[0]), m);
    }
    // Draft rows after an ACK (a prompt piece whose logits nobody wants) and without the hidden
    // state or captures.
    Result ack;
    ack.request_id = 3;
    ack.draft = DraftRows{5, 32, Bytes(5 * 4 * 6), {}, {}};
    EXPECT_EQ(decode_result(std::span<const uint8_t>(encode(ack)).subspan(kHeaderBytes)), ack);
    ack.draft = DraftRows{5, 8, {}, {3}, Bytes(5 * 7)};
    EXPECT_EQ(decode_result(std::span<const uint8_t>(encode(ack)).subspan(kHeaderBytes)), ack);
    // The wire: the flag, the kind bit, the version first.
    const Bytes w = encode(draft_work());
    EXPECT_EQ(be32(w, kHeaderBytes + 4 * 13) & kWorkDraftRows, kWorkDraftRows);
    EXPECT_EQ(be32(w, w.size() - 4 * 7), kDraftVersion);  // version, from, hidden, count, 3 layers
    const Bytes r = encode(draft_result());
    EXPECT_EQ(be32(r, kHeaderBytes + 4 * 5), uint32_t(ResultKind::logits) | kResultDraftRows);
}

TEST(DistProtocol, DraftRecordChecks) {
    const Bytes w = encode(draft_work());
    const size_t at = w.size() - 4 * 7;  // the draft request record
    auto wpatch = [&](size_t field, uint32_t v) {
        Bytes b = w;
        put_be32(b, at + 4 * field, v);
        return b;
    };
    expect_bad(wpatch(0, 2), "draft request version 2, this build reads 1");
    expect_bad(wpatch(1, 3), "draft hidden_from 3 of 3 tokens");
    expect_bad(wpatch(2, 2), "draft hidden is 2, not 0 or 1");
    expect_bad(wpatch(3, 4), "draft capture_count declare 16 bytes");
    expect_bad(wpatch(3, 0x40000000u), "draft capture_count declare");  // before any allocation
    expect_bad(wpatch(5, 40), "capture layers are not strictly ascending");
    expect_bad(append(w, 4), "draft capture_count declare");
    const Bytes cut(w.begin(), w.end() - 4 * 5);  // the record's last five fields gone
    expect_bad(set_header(cut, 8, uint32_t(cut.size() - kHeaderBytes)), "draft request needs");
    // A flag without the record, and the encoder's refusals.
    expect_bad(patch(encode(sample_work()), 13, be32(encode(sample_work()), kHeaderBytes + 4 * 13) | kWorkDraftRows),
               "draft request needs");
    Work bad = draft_work();
    bad.flags &= ~kWorkDraftRows;
    EXPECT_THROW(encode(bad), ProtocolError);
    bad = sample_work();
    bad.flags |= kWorkDraftRows;
    EXPECT_THROW(encode(bad), ProtocolError);
    bad = draft_work();
    bad.draft->hidden_from = 3;
    EXPECT_THROW(encode(bad), ProtocolError);
    bad = draft_work();
    bad.draft->capture = {2, 2};
    EXPECT_THROW(encode(bad), ProtocolError);
    bad.draft->capture.assign(kMaxDraftCaptures + 1, 0);
    for (uint32_t i = 0; i < bad.draft->capture.size(); ++i) bad.draft->capture[i] = i;
    EXPECT_THROW(encode(bad), ProtocolError);

    const Result good = draft_result();
    const Bytes r = encode(good);
    const size_t rat = r.size() - (kDraftRowsFixedBytes + 4 * 2 + good.draft->hidden.size() + good.draft->captured.size());
    auto rpatch = [&](size_t field, uint32_t v) {
        Bytes b = r;
        put_be32(b, rat + 4 * field, v);
        return b;
    };
    expect_bad(rpatch(0, 0), "draft rows version 0, this build reads 1");
    expect_bad(rpatch(1, 0), "draft rows: rows is 0");
    expect_bad(rpatch(2, 12), "draft rows: bits 12 is not 32, 16 or 8");
    expect_bad(rpatch(3, 30), "hidden_bytes 30 is not whole 16-bit rows of 2");
    expect_bad(rpatch(5, 36), "capture_bytes 36 is not whole 16-bit rows of 2 for 2 layers");
    expect_bad(rpatch(5, 128), "the hidden rows and the captured rows differ in width");
    expect_bad(rpatch(4, 0x40000000u), "capture layers exceed 64");  // before any allocation
    Bytes one_layer = rpatch(4, 1);  // 1 layer of 32 bytes declared: the bytes there do not add up
    put_be32(one_layer, rat + 4 * 5, 32);
    expect_bad(one_layer, "draft layers + hidden_bytes + capture_bytes declare 68 bytes");
    expect_bad(rpatch(7, 40), "capture layers are not strictly ascending");
    expect_bad(patch(r, 5, 0x200 | 2), "unknown result_kind 514");
    expect_bad(patch(encode(sample_result()), 5, 2 | kResultDraftRows), "draft rows needs");
    Result rbad = good;
    rbad.draft->captured.pop_back();
    EXPECT_THROW(encode(rbad), ProtocolError);
    rbad = good;
    rbad.draft->layers = {42, 41};
    EXPECT_THROW(encode(rbad), ProtocolError);
}

}  // namespace

namespace {

using namespace ds4::dist;

// The draft seeds of fuzz/corpus/dist_frame (fuzz/make_dist_corpus.py, written field by field
// from docs/DISTRIBUTED.md's draft records) decode to what they say and re-encode exactly.
TEST(DistProtocol, IndependentlyWrittenDraftSeedsDecodeAndReencodeExactly) {
    const std::filesystem::path dir = std::filesystem::path(DS4_SOURCE_DIR) / "fuzz/corpus/dist_frame";
    std::vector<Message> got;
    for (const char* name : {"work_draft.bin", "result_draft.bin", "result_ack_draft.bin"}) {
        SCOPED_TRACE(name);
        std::ifstream in(dir / name, std::ios::binary);
        ASSERT_TRUE(in) << "missing seed";
        const Bytes stream{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        FrameReader r;
        const auto frames = r.feed(stream);
        ASSERT_EQ(frames.size(), 1u);
        got.push_back(decode(frames[0]));
        EXPECT_EQ(encode_any(got.back()), stream);
    }
    const Work& w = std::get<Work>(got[0]);
    ASSERT_TRUE(w.draft);
    EXPECT_EQ(*w.draft, (DraftRequest{1, true, {40, 41, 42}}));
    const Result& r = std::get<Result>(got[1]);
    ASSERT_TRUE(r.draft);
    EXPECT_EQ(r.kind, ResultKind::logits);
    EXPECT_EQ(r.draft->rows, 2u);
    EXPECT_EQ(r.draft->layers, (std::vector<uint32_t>{41, 42}));
    EXPECT_EQ(r.draft->hidden.size(), 16u);
    EXPECT_EQ(r.draft->captured.size(), 32u);
    const Result& a = std::get<Result>(got[2]);
    ASSERT_TRUE(a.draft);
    EXPECT_EQ(a.kind, ResultKind::ack);
    EXPECT_EQ(a.draft->bits, 8u);
}

}  // namespace

namespace {

using namespace ds4::dist;

// A batched WORK (flag kWorkBatch, issue 33): two sessions' rows, 3 + 2 tokens.
Work sample_batch() {
    Work w = sample_work();
    w.tokens = {7, -1, 256, 9, 10};
    w.input_hc.resize(5 * 8 * 2);
    for (size_t i = 0; i < w.input_hc.size(); ++i) w.input_hc[i] = uint8_t(i * 5 + 3);
    const std::span<const int32_t> t(w.tokens);
    w.result_hash = token_hash(w.prefix_hash, t.subspan(0, 3));
    w.flags = kWorkInputHc | kWorkOutputLogits | kWorkBatch;
    w.batch = {{w.session_id, w.prefix_hash, w.result_hash, w.pos0, 3, kWorkOutputLogits},
               {0x77, kTokenHashInit, token_hash(kTokenHashInit, t.subspan(3)), 0, 2,
                kWorkOutputLogits | kWorkAllLogits}};
    return w;
}

// The batch record's checks, each on its own field (offsets from the end of the frame: the
// record is the payload's last 8 + 36 * items bytes), before anything is allocated.
TEST(DistProtocol, BatchedWorkRoundTripsAndEveryFieldIsChecked) {
    const Work w = sample_batch();
    const Bytes f = encode(w);
    const auto frames = read_all(f);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(decode_work(frames[0].payload), w);
    // Byte by byte through the reader.
    FrameReader r;
    std::vector<Frame> got;
    for (uint8_t b : f)
        for (Frame& fr : r.feed(std::span(&b, 1))) got.push_back(std::move(fr));
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(decode_work(got[0].payload), w);

    const size_t rec = f.size() - 8 - 2 * kBatchItemBytes;
    EXPECT_EQ(be32(f, rec), kBatchVersion);
    EXPECT_EQ(be32(f, rec + 4), 2u);
    EXPECT_EQ(be32(f, rec + 8 + 36 + 28), 2u);  // item 1's n_tokens
    auto at = [&](size_t off, uint32_t v) {
        Bytes b = f;
        put_be32(b, rec + off, v);
        return b;
    };
    expect_bad(at(0, 2), "batch record version 2, this build reads 1");
    expect_bad(at(4, 1), "1 batch items, not 2..8");
    expect_bad(at(4, 9), "9 batch items, not 2..8");
    expect_bad(at(4, 0x40000000u), "1073741824 batch items, not 2..8");
    // Within the bound but more items than bytes: refused on the count, before any item is read.
    expect_bad(at(4, 3), "batch item_count declare 108 bytes after the fixed record, the payload has 72");
    expect_bad(at(8 + 36 + 28, 0), "batch item 1 has no tokens");
    expect_bad(at(8 + 36 + 28, 3), "the batch items hold 6 tokens, the WORK 5");
    expect_bad(at(8 + 36 + 24, 0xFFFFFFFFu), "batch item 1: pos0 4294967295 + n_tokens 2 overflows u32");
    expect_bad(at(8 + 36 + 32, 0x4), "batch item 1 has unknown flags 0x4");
    expect_bad(at(8 + 36 + 32, kWorkAllLogits), "batch item 1: ALL_LOGITS without OUTPUT_LOGITS");
    {
        Bytes b = at(8 + 36 + 0, uint32_t(w.session_id >> 32));
        put_be32(b, rec + 8 + 36 + 4, uint32_t(w.session_id));
        expect_bad(b, "batch items 0 and 1 share a session");
    }
    expect_bad(at(8 + 24, 17), "batch item 0 differs from the WORK's session, hashes or pos0");
    expect_bad(at(8 + 16, 1), "batch item 0 differs from the WORK's session, hashes or pos0");
    // The WORK's own flags: OUTPUT_LOGITS exactly when an item asks, no per-item flag on it.
    expect_bad(patch(f, 13, kWorkInputHc | kWorkBatch), "OUTPUT_LOGITS clear but a batch item asks for logits");
    expect_bad(patch(f, 13, w.flags | kWorkResetSession), "BATCH with the WORK's own RESET_SESSION or ALL_LOGITS");
    expect_bad(patch(f, 13, w.flags | kWorkAllLogits), "BATCH with the WORK's own RESET_SESSION or ALL_LOGITS");
    {
        Bytes b = at(8 + 32, 0);
        put_be32(b, rec + 8 + 36 + 32, 0);
        expect_bad(b, "OUTPUT_LOGITS set but no batch item asks for logits");
    }
    // The flag without the record, and the record without the flag.
    expect_bad(patch(encode(sample_work()), 13, kWorkInputHc | kWorkOutputLogits | kWorkBatch),
               "token_bytes + input_hc_bytes + route_bytes + batch record needs");
    expect_bad(patch(f, 13, kWorkInputHc | kWorkOutputLogits), "token_bytes + input_hc_bytes + route_bytes declare");
    // The encoder refuses what the decoder would.
    Work bad = w;
    bad.flags &= ~kWorkBatch;
    EXPECT_THROW(encode(bad), ProtocolError);
    bad = w;
    bad.batch.pop_back();
    EXPECT_THROW(encode(bad), ProtocolError);
    bad = w;
    bad.flags |= kWorkDraftRows;
    bad.draft = DraftRequest{};
    EXPECT_THROW(encode(bad), ProtocolError);
    bad = w;
    bad.batch.resize(kMaxBatchItems + 1, bad.batch.back());
    EXPECT_THROW(encode(bad), ProtocolError);
}

// IDENTITY version 2 carries the features; with none it is exactly version 1 (what an older
// coordinator of ours reads), and a version 2 without features is refused.
TEST(DistProtocol, IdentityVersionTwoCarriesFeatures) {
    Identity id{43, {}, "deepseek4"};
    for (size_t i = 0; i < id.metadata_hash.size(); ++i) id.metadata_hash[i] = uint8_t(i * 3 + 2);
    const Bytes v1 = encode(id);
    EXPECT_EQ(be32(v1, kHeaderBytes), kIdentityVersion);
    EXPECT_EQ(v1.size(), kHeaderBytes + kIdentityFixedBytes + 9);
    id.features = kFeatureBatchedWork;
    const Bytes v2 = encode(id);
    EXPECT_EQ(be32(v2, kHeaderBytes), kIdentityVersion2);
    EXPECT_EQ(be32(v2, kHeaderBytes + 12), kFeatureBatchedWork);
    EXPECT_EQ(v2.size(), v1.size() + 4);
    const auto frames = read_all(v2);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(decode_identity(frames[0].payload), id);
    expect_bad(patch(v2, 3, 0), "version 2 with no features");
    expect_bad(patch(v2, 0, 3), "IDENTITY: version 3");
}

// The batched seed of fuzz/corpus/dist_frame (fuzz/make_dist_corpus.py, written field by field
// from docs/DISTRIBUTED.md's batch record) decodes to what it says and re-encodes exactly.
TEST(DistProtocol, IndependentlyWrittenBatchSeedDecodesAndReencodesExactly) {
    const std::filesystem::path dir = std::filesystem::path(DS4_SOURCE_DIR) / "fuzz/corpus/dist_frame";
    for (const char* name : {"work_batch.bin", "identity_v2.bin"}) {
        SCOPED_TRACE(name);
        std::ifstream in(dir / name, std::ios::binary);
        ASSERT_TRUE(in) << "missing seed";
        const Bytes stream{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        const auto frames = read_all(stream);
        ASSERT_EQ(frames.size(), 1u);
        const Message m = decode(frames[0]);
        EXPECT_EQ(encode_any(m), stream);
        if (const auto* w = std::get_if<Work>(&m)) {
            ASSERT_EQ(w->batch.size(), 3u);
            EXPECT_EQ(w->tokens.size(), 4u);
            EXPECT_EQ(w->batch[1].n_tokens, 2u);
            EXPECT_EQ(w->batch[2].flags, kWorkOutputLogits | kWorkAllLogits);
        } else {
            EXPECT_EQ(std::get<Identity>(m).features, kFeatureBatchedWork);
        }
    }
}

Bytes read_seed(const char* name) {
    std::ifstream in(std::filesystem::path(DS4_SOURCE_DIR) / "fuzz/corpus/dist_frame" / name, std::ios::binary);
    EXPECT_TRUE(in) << "missing seed " << name;
    return Bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The extension negotiation's seeds (issue 38; fuzz/make_dist_corpus.py, written field by field
// from docs/DISTRIBUTED.md "Mixed clusters"): the IDENTIFY probe, our worker's IDENTITY answer,
// upstream's refusal and the whole exchange decode to what they say and re-encode exactly; an
// IDENTITY of another version or with a wrong arch_len fails.
TEST(DistProtocol, IndependentlyWrittenIdentifySeedsDecodeAndReencodeExactly) {
    std::vector<Message> got;
    for (const char* name : {"work_identify.bin", "identity.bin", "result_identify_refused.bin"}) {
        SCOPED_TRACE(name);
        const Bytes stream = read_seed(name);
        FrameReader r;
        const auto frames = r.feed(stream);
        ASSERT_EQ(frames.size(), 1u);
        got.push_back(decode(frames[0]));
        EXPECT_EQ(encode_any(got.back()), stream);
    }
    const Work& w = std::get<Work>(got[0]);
    EXPECT_EQ(w.flags, kWorkIdentify);
    EXPECT_EQ(w.model_id, 0u);
    EXPECT_EQ(w.tokens, (std::vector<int32_t>{0}));
    EXPECT_TRUE(w.route.empty());
    const Identity& id = std::get<Identity>(got[1]);
    EXPECT_EQ(id.architecture, "deepseek4");
    EXPECT_EQ(id.n_layers, 43u);
    EXPECT_EQ(id.metadata_hash[0], 0xA0);
    EXPECT_EQ(id.metadata_hash[15], 0xAF);
    const Result& refused = std::get<Result>(got[2]);
    EXPECT_EQ(result_error_message(refused), "invalid distributed WORK flags");
    EXPECT_FALSE(result_is_state_mismatch(refused));

    const Bytes stream = read_seed("stream_identify.bin");
    Bytes again;
    std::vector<Message> exchange;
    for (const Frame& f : read_all(stream)) {
        exchange.push_back(decode(f));
        const Bytes e = encode_any(exchange.back());
        again.insert(again.end(), e.begin(), e.end());
    }
    EXPECT_EQ(again, stream);
    ASSERT_EQ(exchange.size(), 3u);
    EXPECT_EQ(std::get<Hello>(exchange[0]).model_name, "DeepSeek V4 Flash");
    EXPECT_EQ(std::get<Work>(exchange[1]).flags, kWorkIdentify);
    EXPECT_EQ(std::get<Identity>(exchange[2]), id);

    for (const char* name : {"identity_bad_version.bin", "identity_bad_arch_len.bin"}) {
        SCOPED_TRACE(name);
        const Bytes bad = read_seed(name);
        EXPECT_THROW(
            {
                FrameReader r;
                for (const Frame& f : r.feed(bad)) decode(f);
            },
            ProtocolError);
    }
}

}  // namespace
