#include "dist/protocol.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace ds4::dist {

namespace {

template <class... Args>
[[noreturn]] void bad(fmt::format_string<Args...> f, Args&&... args) {
    throw ProtocolError(fmt::format(f, std::forward<Args>(args)...));
}

constexpr uint32_t hi(uint64_t v) { return static_cast<uint32_t>(v >> 32); }
constexpr uint32_t lo(uint64_t v) { return static_cast<uint32_t>(v); }

uint32_t to_u32(uint64_t n, const char* what) {
    if (n > std::numeric_limits<uint32_t>::max()) bad("dist protocol: {} of {} bytes does not fit in u32", what, n);
    return static_cast<uint32_t>(n);
}

bool hidden_bits_ok(uint32_t bits) { return bits == 32 || bits == 16 || bits == 8; }

// Builds one frame: reserves the header, appends big-endian fields, patches the size at the end.
class Writer {
public:
    explicit Writer(FrameType t) {
        u32(kMagic);
        u32(static_cast<uint32_t>(t));
        u32(0);
    }
    void u32(uint32_t v) {
        const uint8_t b[4] = {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)};
        out_.insert(out_.end(), b, b + 4);
    }
    void u64(uint64_t v) {
        u32(hi(v));
        u32(lo(v));
    }
    void bytes(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        out_.insert(out_.end(), b, b + n);
    }
    void tokens(const std::vector<int32_t>& t) {
        for (int32_t v : t) u32(static_cast<uint32_t>(v));
    }
    std::vector<uint8_t> finish(const char* frame) {
        const uint32_t n = to_u32(out_.size() - kHeaderBytes, frame);
        out_[8] = uint8_t(n >> 24);
        out_[9] = uint8_t(n >> 16);
        out_[10] = uint8_t(n >> 8);
        out_[11] = uint8_t(n);
        return std::move(out_);
    }

private:
    std::vector<uint8_t> out_;
};

// Reads big-endian fields of one payload; every read checks the bytes left.
class Reader {
public:
    Reader(std::span<const uint8_t> b, const char* frame) : b_(b), frame_(frame) {}
    uint32_t u32(const char* field) {
        need(4, field);
        const uint8_t* p = b_.data() + at_;
        at_ += 4;
        return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
    }
    uint64_t u64(const char* field) {
        const uint64_t h = u32(field);
        return h << 32 | u32(field);
    }
    std::span<const uint8_t> take(uint64_t n, const char* field) {
        need(n, field);
        auto s = b_.subspan(at_, static_cast<size_t>(n));
        at_ += static_cast<size_t>(n);
        return s;
    }
    void need(uint64_t n, const char* field) const {
        if (n > left())
            bad("dist {}: {} needs {} bytes at payload offset {}, only {} left", frame_, field, n, at_, left());
    }
    uint64_t left() const { return b_.size() - at_; }
    size_t offset() const { return at_; }
    // The fixed record's declared variable parts must add up to exactly the rest of the payload.
    void expect_rest(uint64_t declared, const char* what) const {
        if (declared != left())
            bad("dist {}: {} declare {} bytes after the fixed record, the payload has {}", frame_, what, declared,
                left());
    }
    void expect_end() const {
        if (left() != 0) bad("dist {}: {} trailing bytes", frame_, left());
    }
    const char* frame() const { return frame_; }

private:
    std::span<const uint8_t> b_;
    size_t at_ = 0;
    const char* frame_;
};

std::vector<int32_t> read_tokens(std::span<const uint8_t> b) {
    std::vector<int32_t> t(b.size() / 4);
    for (size_t i = 0; i < t.size(); ++i) {
        const uint8_t* p = b.data() + 4 * i;
        t[i] = static_cast<int32_t>(uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]));
    }
    return t;
}

// The size of the whole fixed record a type must at least carry (exactly, for SAVE_REQ).
size_t fixed_bytes(FrameType t) {
    switch (t) {
        case FrameType::hello: return kHelloFixedBytes;
        case FrameType::error: return 0;
        case FrameType::work: return kWorkFixedBytes;
        case FrameType::result: return kResultFixedBytes;
        case FrameType::snapshot_save_req: return kSnapshotSaveReqBytes;
        case FrameType::snapshot_begin:
        case FrameType::snapshot_load_begin: return kSnapshotBeginFixedBytes;
        case FrameType::snapshot_chunk: return kSnapshotChunkFixedBytes;
        case FrameType::snapshot_done: return kSnapshotDoneFixedBytes;
        case FrameType::identity: return kIdentityFixedBytes;
    }
    return 0;
}

void check_text(std::string_view s, uint32_t max, const char* frame, const char* field) {
    if (s.size() > max) bad("dist {}: {} of {} bytes exceeds {}", frame, field, s.size(), max);
    if (s.find('\0') != std::string_view::npos) bad("dist {}: {} contains a NUL byte", frame, field);
}

void check_port(uint32_t port, const char* frame, const char* field) {
    if (port > 65535) bad("dist {}: {} {} is not a TCP port", frame, field, port);
}

std::string as_string(std::span<const uint8_t> b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

void write_save_req(Writer& w, const SnapshotSaveReq& r) {
    w.u32(r.model_id);
    w.u64(r.session_id);
    w.u64(r.request_id);
    w.u64(r.token_hash);
    w.u32(r.token_count);
    w.u32(r.layer_start);
    w.u32(r.layer_end);
}

SnapshotSaveReq read_save_req(Reader& r) {
    SnapshotSaveReq q;
    q.model_id = r.u32("model_id");
    q.session_id = r.u64("session_hi/lo");
    q.request_id = r.u64("request_hi/lo");
    q.token_hash = r.u64("token_hash_hi/lo");
    q.token_count = r.u32("token_count");
    q.layer_start = r.u32("layer_start");
    q.layer_end = r.u32("layer_end");
    return q;
}

std::vector<uint8_t> encode_begin(const SnapshotBegin& m, FrameType t) {
    const char* frame = frame_type_name(t);
    if (m.tokens.size() != m.req.token_count)
        bad("dist {}: token_count {} but {} tokens", frame, m.req.token_count, m.tokens.size());
    Writer w(t);
    write_save_req(w, m.req);
    w.u64(m.payload_bytes);
    w.u32(m.status);
    w.u32(to_u32(uint64_t(m.tokens.size()) * 4, "token_bytes"));
    w.u32(to_u32(m.message.size(), "message_bytes"));
    w.tokens(m.tokens);
    w.bytes(m.message.data(), m.message.size());
    return w.finish(frame);
}

SnapshotBegin decode_begin(std::span<const uint8_t> payload, FrameType t) {
    Reader r(payload, frame_type_name(t));
    SnapshotBegin m;
    m.req = read_save_req(r);
    m.payload_bytes = r.u64("payload_hi/lo");
    m.status = r.u32("status");
    const uint32_t token_bytes = r.u32("token_bytes");
    const uint32_t message_bytes = r.u32("message_bytes");
    if (uint64_t(token_bytes) != uint64_t(m.req.token_count) * 4)
        bad("dist {}: token_bytes {} is not 4 * token_count ({})", r.frame(), token_bytes, m.req.token_count);
    r.expect_rest(uint64_t(token_bytes) + message_bytes, "token_bytes + message_bytes");
    m.tokens = read_tokens(r.take(token_bytes, "tokens"));
    m.message = as_string(r.take(message_bytes, "message"));
    return m;
}

}  // namespace

const char* frame_type_name(FrameType t) {
    switch (t) {
        case FrameType::hello: return "HELLO";
        case FrameType::error: return "ERROR";
        case FrameType::work: return "WORK";
        case FrameType::result: return "RESULT";
        case FrameType::snapshot_save_req: return "SNAPSHOT_SAVE_REQ";
        case FrameType::snapshot_begin: return "SNAPSHOT_BEGIN";
        case FrameType::snapshot_chunk: return "SNAPSHOT_CHUNK";
        case FrameType::snapshot_done: return "SNAPSHOT_DONE";
        case FrameType::snapshot_load_begin: return "SNAPSHOT_LOAD_BEGIN";
        case FrameType::identity: return "IDENTITY";
    }
    return "?";
}

// ---- encode ----

std::vector<uint8_t> encode(const Hello& m) {
    check_text(m.model_name, kMaxModelNameBytes, "HELLO", "model name");
    check_port(m.listen_port, "HELLO", "listen_port");
    Writer w(FrameType::hello);
    w.u32(m.model_id);
    w.u32(m.quant_bits);
    w.u32(m.layer_start);
    w.u32(m.layer_end);
    w.u32(m.has_output ? 1 : 0);
    w.u32(m.has_hidden ? 1 : 0);
    w.u32(m.ctx_size);
    w.u32(m.n_layers);
    w.u32(m.listen_port);
    w.u32(static_cast<uint32_t>(m.model_name.size()));
    w.bytes(m.model_name.data(), m.model_name.size());
    return w.finish("HELLO");
}

std::vector<uint8_t> encode(const ErrorFrame& m) {
    Writer w(FrameType::error);
    w.bytes(m.message.data(), m.message.size());
    return w.finish("ERROR");
}

std::vector<uint8_t> encode_route(const std::vector<RouteEntry>& route, const std::optional<RouteReturn>& ret) {
    std::vector<uint8_t> out;
    auto u32 = [&](uint32_t v) {
        const uint8_t b[4] = {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)};
        out.insert(out.end(), b, b + 4);
    };
    for (const RouteEntry& e : route) {
        if (e.host.empty()) bad("dist WORK: route entry with an empty host");
        check_text(e.host, kMaxHostBytes, "WORK", "route host");
        check_port(e.port, "WORK", "route port");
        if (e.flags & ~kRouteOutputLogits) bad("dist WORK: unknown route flags {:#x}", e.flags);
        u32(static_cast<uint32_t>(e.host.size()));
        u32(e.port);
        u32(e.layer_start);
        u32(e.layer_end);
        u32(e.flags);
        out.insert(out.end(), e.host.begin(), e.host.end());
    }
    if (ret) {
        if (ret->kind != kRouteReturnUpstream) bad("dist WORK: unknown route-return kind {}", ret->kind);
        check_text(ret->host, kMaxHostBytes, "WORK", "route-return host");
        check_port(ret->port, "WORK", "route-return port");
        u32(ret->kind);
        u32(static_cast<uint32_t>(ret->host.size()));
        u32(ret->port);
        out.insert(out.end(), ret->host.begin(), ret->host.end());
    }
    return out;
}

namespace {

void check_layers(const std::vector<uint32_t>& layers, const char* frame) {
    if (layers.size() > kMaxDraftCaptures)
        bad("dist {}: {} capture layers exceed {}", frame, layers.size(), kMaxDraftCaptures);
    for (size_t i = 1; i < layers.size(); ++i)
        if (layers[i] <= layers[i - 1]) bad("dist {}: capture layers are not strictly ascending", frame);
}

// DraftRows: whole rows of one width for the hidden state and the captures.
void check_draft_rows(uint32_t rows, uint32_t bits, uint64_t hidden_bytes, uint64_t n_layers,
                      uint64_t capture_bytes) {
    if (rows == 0) bad("dist RESULT draft rows: rows is 0");
    if (!hidden_bits_ok(bits)) bad("dist RESULT draft rows: bits {} is not 32, 16 or 8", bits);
    const uint64_t row_value = uint64_t(rows) * (bits / 8);
    if (hidden_bytes % row_value != 0)
        bad("dist RESULT draft rows: hidden_bytes {} is not whole {}-bit rows of {}", hidden_bytes, bits, rows);
    if (n_layers == 0 ? capture_bytes != 0 : capture_bytes % (n_layers * row_value) != 0)
        bad("dist RESULT draft rows: capture_bytes {} is not whole {}-bit rows of {} for {} layers", capture_bytes,
            bits, rows, n_layers);
    if (hidden_bytes != 0 && n_layers != 0 && hidden_bytes * n_layers != capture_bytes)
        bad("dist RESULT draft rows: the hidden rows and the captured rows differ in width");
}

void write_draft_request(Writer& w, const DraftRequest& d, size_t n_tokens) {
    if (d.hidden_from >= n_tokens) bad("dist WORK: draft hidden_from {} of {} tokens", d.hidden_from, n_tokens);
    check_layers(d.capture, "WORK");
    w.u32(kDraftVersion);
    w.u32(d.hidden_from);
    w.u32(d.hidden ? 1 : 0);
    w.u32(static_cast<uint32_t>(d.capture.size()));
    for (uint32_t l : d.capture) w.u32(l);
}

void write_draft_rows(Writer& w, const DraftRows& d) {
    check_layers(d.layers, "RESULT");
    check_draft_rows(d.rows, d.bits, d.hidden.size(), d.layers.size(), d.captured.size());
    w.u32(kDraftVersion);
    w.u32(d.rows);
    w.u32(d.bits);
    w.u32(to_u32(d.hidden.size(), "draft hidden_bytes"));
    w.u32(static_cast<uint32_t>(d.layers.size()));
    w.u32(to_u32(d.captured.size(), "draft capture_bytes"));
    for (uint32_t l : d.layers) w.u32(l);
    w.bytes(d.hidden.data(), d.hidden.size());
    w.bytes(d.captured.data(), d.captured.size());
}

// The batch record's rules (protocol.h, Work::batch), for the encoder and the decoder alike.
void check_batch(const Work& m, uint64_t n_tokens) {
    if (m.flags & kWorkDraftRows) bad("dist WORK: BATCH with DRAFT_ROWS");
    if (m.flags & (kWorkResetSession | kWorkAllLogits))
        bad("dist WORK: BATCH with the WORK's own RESET_SESSION or ALL_LOGITS (they are per item)");
    if (m.batch.size() < 2 || m.batch.size() > kMaxBatchItems)
        bad("dist WORK: {} batch items, not 2..{}", m.batch.size(), kMaxBatchItems);
    uint64_t rows = 0;
    bool logits = false;
    for (size_t i = 0; i < m.batch.size(); ++i) {
        const WorkItem& it = m.batch[i];
        if (it.n_tokens == 0) bad("dist WORK: batch item {} has no tokens", i);
        if (uint64_t(it.pos0) + it.n_tokens > std::numeric_limits<uint32_t>::max())
            bad("dist WORK: batch item {}: pos0 {} + n_tokens {} overflows u32", i, it.pos0, it.n_tokens);
        if (it.flags & ~kWorkItemFlags) bad("dist WORK: batch item {} has unknown flags {:#x}", i, it.flags);
        if ((it.flags & kWorkAllLogits) && !(it.flags & kWorkOutputLogits))
            bad("dist WORK: batch item {}: ALL_LOGITS without OUTPUT_LOGITS", i);
        for (size_t j = 0; j < i; ++j)
            if (m.batch[j].session_id == it.session_id) bad("dist WORK: batch items {} and {} share a session", j, i);
        rows += it.n_tokens;
        logits = logits || (it.flags & kWorkOutputLogits);
    }
    if (rows != n_tokens) bad("dist WORK: the batch items hold {} tokens, the WORK {}", rows, n_tokens);
    const WorkItem& first = m.batch.front();
    if (first.session_id != m.session_id || first.prefix_hash != m.prefix_hash ||
        first.result_hash != m.result_hash || first.pos0 != m.pos0)
        bad("dist WORK: batch item 0 differs from the WORK's session, hashes or pos0");
    if (logits != ((m.flags & kWorkOutputLogits) != 0))
        bad("dist WORK: OUTPUT_LOGITS {} but {} batch item asks for logits", logits ? "clear" : "set",
            logits ? "a" : "no");
}

void write_batch(Writer& w, const Work& m) {
    check_batch(m, m.tokens.size());
    w.u32(kBatchVersion);
    w.u32(static_cast<uint32_t>(m.batch.size()));
    for (const WorkItem& it : m.batch) {
        w.u64(it.session_id);
        w.u64(it.prefix_hash);
        w.u64(it.result_hash);
        w.u32(it.pos0);
        w.u32(it.n_tokens);
        w.u32(it.flags);
    }
}

}  // namespace

std::vector<uint8_t> encode(const Work& m) {
    if (m.tokens.empty()) bad("dist WORK: no tokens");
    if (m.flags & ~kWorkKnownFlags) bad("dist WORK: unknown flags {:#x}", m.flags);
    const bool has_hc = (m.flags & kWorkInputHc) != 0;
    if (has_hc != !m.input_hc.empty())
        bad("dist WORK: INPUT_HC flag {} but {} hidden-state bytes", has_hc ? "set" : "clear", m.input_hc.size());
    if (((m.flags & kWorkDraftRows) != 0) != m.draft.has_value())
        bad("dist WORK: DRAFT_ROWS flag {} but {} draft request", m.draft ? "clear" : "set", m.draft ? "a" : "no");
    if (((m.flags & kWorkBatch) != 0) != !m.batch.empty())
        bad("dist WORK: BATCH flag {} but {} batch items", m.batch.empty() ? "set" : "clear", m.batch.size());
    if (has_hc ? !hidden_bits_ok(m.input_hc_bits) : (m.input_hc_bits != 0 && !hidden_bits_ok(m.input_hc_bits)))
        bad("dist WORK: input_hc_bits {} is not 32, 16 or 8", m.input_hc_bits);
    const std::vector<uint8_t> blob = encode_route(m.route, m.route_return);
    Writer w(FrameType::work);
    w.u32(m.model_id);
    w.u64(m.session_id);
    w.u64(m.request_id);
    w.u64(m.prefix_hash);
    w.u64(m.result_hash);
    w.u32(m.pos0);
    w.u32(to_u32(m.tokens.size(), "n_tokens"));
    w.u32(m.layer_start);
    w.u32(m.layer_end);
    w.u32(m.flags);
    w.u32(to_u32(uint64_t(m.tokens.size()) * 4, "token_bytes"));
    w.u32(to_u32(m.input_hc.size(), "input_hc_bytes"));
    w.u32(m.input_hc_bits);
    w.u32(to_u32(m.route.size(), "route_count"));
    w.u32(m.route_index);
    w.u32(to_u32(blob.size(), "route_bytes"));
    w.tokens(m.tokens);
    w.bytes(m.input_hc.data(), m.input_hc.size());
    w.bytes(blob.data(), blob.size());
    if (m.draft) write_draft_request(w, *m.draft, m.tokens.size());
    if (!m.batch.empty()) write_batch(w, m);
    return w.finish("WORK");
}

std::vector<uint8_t> encode(const Result& m) {
    Writer w(FrameType::result);
    w.u64(m.request_id);
    w.u64(m.result_hash);
    w.u32(m.status);
    w.u32(static_cast<uint32_t>(m.kind) | (m.draft ? kResultDraftRows : 0));
    w.u32(to_u32(m.telemetry.size(), "telemetry_count"));
    w.u32(to_u32(uint64_t(m.telemetry.size()) * kTelemetryBytes, "telemetry_bytes"));
    w.u32(to_u32(m.payload.size(), "payload_bytes"));
    w.u32(m.payload_bits);
    for (const Telemetry& t : m.telemetry) {
        for (uint32_t v : {t.layer_start, t.layer_end, t.route_index, t.pos0, t.n_tokens, t.eval_usec,
                           t.downstream_wait_usec, t.forward_send_usec, t.input_bytes, t.output_bytes})
            w.u32(v);
    }
    w.bytes(m.payload.data(), m.payload.size());
    if (m.draft) write_draft_rows(w, *m.draft);
    return w.finish("RESULT");
}

std::vector<uint8_t> encode(const SnapshotSaveReq& m) {
    Writer w(FrameType::snapshot_save_req);
    write_save_req(w, m);
    return w.finish("SNAPSHOT_SAVE_REQ");
}

std::vector<uint8_t> encode(const SnapshotBegin& m) { return encode_begin(m, FrameType::snapshot_begin); }
std::vector<uint8_t> encode(const SnapshotLoadBegin& m) { return encode_begin(m, FrameType::snapshot_load_begin); }

std::vector<uint8_t> encode(const SnapshotChunk& m) {
    if (m.data.size() > kSnapshotChunkBytes)
        bad("dist SNAPSHOT_CHUNK: {} bytes exceed the chunk size {}", m.data.size(), kSnapshotChunkBytes);
    Writer w(FrameType::snapshot_chunk);
    w.u64(m.request_id);
    w.u32(static_cast<uint32_t>(m.data.size()));
    w.bytes(m.data.data(), m.data.size());
    return w.finish("SNAPSHOT_CHUNK");
}

std::vector<uint8_t> encode(const SnapshotDone& m) {
    Writer w(FrameType::snapshot_done);
    w.u64(m.request_id);
    w.u32(m.status);
    w.u32(to_u32(m.message.size(), "message_bytes"));
    w.bytes(m.message.data(), m.message.size());
    return w.finish("SNAPSHOT_DONE");
}

std::vector<uint8_t> encode(const Identity& m) {
    check_text(m.architecture, kMaxModelNameBytes, "IDENTITY", "architecture");
    Writer w(FrameType::identity);
    w.u32(m.features ? kIdentityVersion2 : kIdentityVersion);
    w.u32(m.n_layers);
    w.u32(static_cast<uint32_t>(m.architecture.size()));
    if (m.features) w.u32(m.features);
    w.bytes(m.metadata_hash.data(), m.metadata_hash.size());
    w.bytes(m.architecture.data(), m.architecture.size());
    return w.finish("IDENTITY");
}

std::string result_error_message(const Result& r) {
    if (r.status == kStatusOk) return "";
    if (r.kind == ResultKind::ack && !r.payload.empty()) return as_string(r.payload);
    if (r.status == kStatusStateMismatch) return "state mismatch";
    return fmt::format("status {}", r.status);
}

bool result_is_state_mismatch(const Result& r) {
    if (r.status != kStatusStateMismatch) return false;
    return r.payload.empty() || result_error_message(r) == kUpstreamPrefixMismatch;
}

// ---- decode ----

Identity decode_identity(std::span<const uint8_t> payload) {
    Reader r(payload, "IDENTITY");
    Identity m;
    const uint32_t version = r.u32("version");
    m.n_layers = r.u32("n_layers");
    const uint32_t arch_len = r.u32("arch_len");
    if (version != kIdentityVersion && version != kIdentityVersion2)
        bad("dist IDENTITY: version {}, this build reads {} and {}", version, kIdentityVersion, kIdentityVersion2);
    if (version == kIdentityVersion2) {
        m.features = r.u32("features");
        if (m.features == 0) bad("dist IDENTITY: version 2 with no features (that is version 1)");
    }
    if (arch_len > kMaxModelNameBytes) bad("dist IDENTITY: arch_len {} exceeds {}", arch_len, kMaxModelNameBytes);
    const auto h = r.take(m.metadata_hash.size(), "metadata hash");
    std::copy(h.begin(), h.end(), m.metadata_hash.begin());
    r.expect_rest(arch_len, "arch_len");
    m.architecture = as_string(r.take(arch_len, "architecture"));
    check_text(m.architecture, kMaxModelNameBytes, "IDENTITY", "architecture");
    return m;
}

Hello decode_hello(std::span<const uint8_t> payload) {
    Reader r(payload, "HELLO");
    Hello m;
    m.model_id = r.u32("model_id");
    m.quant_bits = r.u32("quant_bits");
    m.layer_start = r.u32("layer_start");
    m.layer_end = r.u32("layer_end");
    const uint32_t has_output = r.u32("has_output");
    const uint32_t has_hidden = r.u32("has_hidden");
    m.ctx_size = r.u32("ctx_size");
    m.n_layers = r.u32("n_layers");
    m.listen_port = r.u32("listen_port");
    const uint32_t name_len = r.u32("model_name_len");
    if (has_output > 1) bad("dist HELLO: has_output is {}, not 0 or 1", has_output);
    if (has_hidden > 1) bad("dist HELLO: has_hidden is {}, not 0 or 1", has_hidden);
    m.has_output = has_output != 0;
    m.has_hidden = has_hidden != 0;
    check_port(m.listen_port, "HELLO", "listen_port");
    if (name_len > kMaxModelNameBytes) bad("dist HELLO: model_name_len {} exceeds {}", name_len, kMaxModelNameBytes);
    r.expect_rest(name_len, "model_name_len");
    m.model_name = as_string(r.take(name_len, "model name"));
    check_text(m.model_name, kMaxModelNameBytes, "HELLO", "model name");
    return m;
}

ErrorFrame decode_error(std::span<const uint8_t> payload) { return ErrorFrame{as_string(payload)}; }

void decode_route(std::span<const uint8_t> blob, uint32_t count, std::vector<RouteEntry>& route,
                  std::optional<RouteReturn>& ret) {
    Reader r(blob, "WORK route");
    route.clear();
    ret.reset();
    // Each entry takes at least its fixed record, so a huge count fails here, before reserve.
    if (uint64_t(count) * kRouteFixedBytes > blob.size())
        bad("dist WORK route: route_count {} needs at least {} bytes, route_bytes is {}", count,
            uint64_t(count) * kRouteFixedBytes, blob.size());
    route.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
        RouteEntry e;
        const uint32_t host_len = r.u32("host_len");
        e.port = r.u32("port");
        e.layer_start = r.u32("layer_start");
        e.layer_end = r.u32("layer_end");
        e.flags = r.u32("flags");
        if (host_len == 0 || host_len > kMaxHostBytes)
            bad("dist WORK route: entry {} host_len {} is not 1..{}", i, host_len, kMaxHostBytes);
        check_port(e.port, "WORK route", "port");
        if (e.port == 0) bad("dist WORK route: entry {} has port 0", i);
        if (e.flags & ~kRouteOutputLogits) bad("dist WORK route: entry {} has unknown flags {:#x}", i, e.flags);
        e.host = as_string(r.take(host_len, "host"));
        check_text(e.host, kMaxHostBytes, "WORK route", "host");
        route.push_back(std::move(e));
    }
    if (r.left() == 0) return;
    RouteReturn back;
    back.kind = r.u32("route-return kind");
    const uint32_t host_len = r.u32("route-return host_len");
    back.port = r.u32("route-return port");
    if (back.kind != kRouteReturnUpstream) bad("dist WORK route: unknown route-return kind {}", back.kind);
    if (host_len > kMaxHostBytes) bad("dist WORK route: route-return host_len {} exceeds {}", host_len, kMaxHostBytes);
    check_port(back.port, "WORK route", "route-return port");
    back.host = as_string(r.take(host_len, "route-return host"));
    check_text(back.host, kMaxHostBytes, "WORK route", "route-return host");
    r.expect_end();
    ret = std::move(back);
}

namespace {

std::vector<uint32_t> read_layers(Reader& r, uint32_t count) {
    if (count > kMaxDraftCaptures) bad("dist {}: {} capture layers exceed {}", r.frame(), count, kMaxDraftCaptures);
    r.need(uint64_t(count) * 4, "capture layers");
    std::vector<uint32_t> layers(count);
    for (uint32_t& l : layers) l = r.u32("capture layer");
    check_layers(layers, r.frame());
    return layers;
}

DraftRequest read_draft_request(Reader& r, uint32_t n_tokens) {
    DraftRequest d;
    const uint32_t version = r.u32("draft version");
    d.hidden_from = r.u32("draft hidden_from");
    const uint32_t hidden = r.u32("draft hidden");
    const uint32_t count = r.u32("draft capture_count");
    if (version != kDraftVersion) bad("dist WORK: draft request version {}, this build reads {}", version, kDraftVersion);
    if (d.hidden_from >= n_tokens) bad("dist WORK: draft hidden_from {} of {} tokens", d.hidden_from, n_tokens);
    if (hidden > 1) bad("dist WORK: draft hidden is {}, not 0 or 1", hidden);
    d.hidden = hidden != 0;
    r.expect_rest(uint64_t(count) * 4, "draft capture_count");
    d.capture = read_layers(r, count);
    return d;
}

DraftRows read_draft_rows(Reader& r) {
    DraftRows d;
    const uint32_t version = r.u32("draft version");
    d.rows = r.u32("draft rows");
    d.bits = r.u32("draft bits");
    const uint32_t hidden_bytes = r.u32("draft hidden_bytes");
    const uint32_t count = r.u32("draft capture_count");
    const uint32_t capture_bytes = r.u32("draft capture_bytes");
    if (version != kDraftVersion) bad("dist RESULT: draft rows version {}, this build reads {}", version, kDraftVersion);
    if (count > kMaxDraftCaptures) bad("dist RESULT: {} capture layers exceed {}", count, kMaxDraftCaptures);
    check_draft_rows(d.rows, d.bits, hidden_bytes, count, capture_bytes);
    r.expect_rest(uint64_t(count) * 4 + hidden_bytes + capture_bytes, "draft layers + hidden_bytes + capture_bytes");
    d.layers = read_layers(r, count);
    const auto h = r.take(hidden_bytes, "draft hidden rows");
    d.hidden.assign(h.begin(), h.end());
    const auto c = r.take(capture_bytes, "draft captured rows");
    d.captured.assign(c.begin(), c.end());
    return d;
}

// The batch record (protocol.h, Work::batch): the count is checked against the bytes there
// before the items are allocated.
void read_batch(Reader& r, Work& m, uint32_t n_tokens) {
    const uint32_t version = r.u32("batch version");
    const uint32_t count = r.u32("batch item_count");
    if (version != kBatchVersion) bad("dist WORK: batch record version {}, this build reads {}", version, kBatchVersion);
    if (count < 2 || count > kMaxBatchItems) bad("dist WORK: {} batch items, not 2..{}", count, kMaxBatchItems);
    r.expect_rest(uint64_t(count) * kBatchItemBytes, "batch item_count");
    m.batch.resize(count);
    for (WorkItem& it : m.batch) {
        it.session_id = r.u64("batch session_hi/lo");
        it.prefix_hash = r.u64("batch prefix_hash_hi/lo");
        it.result_hash = r.u64("batch result_hash_hi/lo");
        it.pos0 = r.u32("batch pos0");
        it.n_tokens = r.u32("batch n_tokens");
        it.flags = r.u32("batch flags");
    }
    check_batch(m, n_tokens);
}

}  // namespace

Work decode_work(std::span<const uint8_t> payload) {
    Reader r(payload, "WORK");
    Work m;
    m.model_id = r.u32("model_id");
    m.session_id = r.u64("session_hi/lo");
    m.request_id = r.u64("request_hi/lo");
    m.prefix_hash = r.u64("prefix_hash_hi/lo");
    m.result_hash = r.u64("result_hash_hi/lo");
    m.pos0 = r.u32("pos0");
    const uint32_t n_tokens = r.u32("n_tokens");
    m.layer_start = r.u32("layer_start");
    m.layer_end = r.u32("layer_end");
    m.flags = r.u32("flags");
    const uint32_t token_bytes = r.u32("token_bytes");
    const uint32_t hc_bytes = r.u32("input_hc_bytes");
    m.input_hc_bits = r.u32("input_hc_bits");
    const uint32_t route_count = r.u32("route_count");
    m.route_index = r.u32("route_index");
    const uint32_t route_bytes = r.u32("route_bytes");

    if (n_tokens == 0) bad("dist WORK: n_tokens is 0");
    if (uint64_t(m.pos0) + n_tokens > std::numeric_limits<uint32_t>::max())
        bad("dist WORK: pos0 {} + n_tokens {} overflows u32", m.pos0, n_tokens);
    if (uint64_t(token_bytes) != uint64_t(n_tokens) * 4)
        bad("dist WORK: token_bytes {} is not 4 * n_tokens ({})", token_bytes, n_tokens);
    if (m.flags & ~kWorkKnownFlags) bad("dist WORK: unknown flags {:#x}", m.flags);
    const bool has_hc = (m.flags & kWorkInputHc) != 0;
    if (has_hc) {
        if (!hidden_bits_ok(m.input_hc_bits)) bad("dist WORK: input_hc_bits {} is not 32, 16 or 8", m.input_hc_bits);
        if (hc_bytes == 0) bad("dist WORK: INPUT_HC is set but input_hc_bytes is 0");
        const uint64_t per_token_value = uint64_t(n_tokens) * (m.input_hc_bits / 8);
        if (hc_bytes % per_token_value != 0)
            bad("dist WORK: input_hc_bytes {} is not a whole number of {}-bit values for {} tokens", hc_bytes,
                m.input_hc_bits, n_tokens);
    } else {
        if (hc_bytes != 0) bad("dist WORK: input_hc_bytes {} without the INPUT_HC flag", hc_bytes);
        if (m.input_hc_bits != 0 && !hidden_bits_ok(m.input_hc_bits))
            bad("dist WORK: input_hc_bits {} is not 0, 32, 16 or 8", m.input_hc_bits);
    }
    if (route_count == 0 ? m.route_index != 0 : m.route_index >= route_count)
        bad("dist WORK: route_index {} out of range for route_count {}", m.route_index, route_count);
    const uint64_t declared = uint64_t(token_bytes) + hc_bytes + route_bytes;
    if (m.flags & kWorkDraftRows)
        r.need(declared + kDraftRequestFixedBytes, "token_bytes + input_hc_bytes + route_bytes + draft request");
    else if (m.flags & kWorkBatch)
        r.need(declared + kBatchFixedBytes, "token_bytes + input_hc_bytes + route_bytes + batch record");
    else
        r.expect_rest(declared, "token_bytes + input_hc_bytes + route_bytes");
    m.tokens = read_tokens(r.take(token_bytes, "tokens"));
    const auto hc = r.take(hc_bytes, "hidden state");
    m.input_hc.assign(hc.begin(), hc.end());
    decode_route(r.take(route_bytes, "route blob"), route_count, m.route, m.route_return);
    if (m.flags & kWorkDraftRows) m.draft = read_draft_request(r, n_tokens);
    if (m.flags & kWorkBatch) read_batch(r, m, n_tokens);
    return m;
}

Result decode_result(std::span<const uint8_t> payload) {
    Reader r(payload, "RESULT");
    Result m;
    m.request_id = r.u64("request_hi/lo");
    m.result_hash = r.u64("result_hash_hi/lo");
    m.status = r.u32("status");
    const uint32_t kind = r.u32("result_kind");
    const uint32_t tele_count = r.u32("telemetry_count");
    const uint32_t tele_bytes = r.u32("telemetry_bytes");
    const uint32_t payload_bytes = r.u32("payload_bytes");
    m.payload_bits = r.u32("payload_bits");
    const bool draft = (kind & kResultDraftRows) != 0;
    if ((kind & ~kResultDraftRows) > 2) bad("dist RESULT: unknown result_kind {}", kind);
    m.kind = static_cast<ResultKind>(kind & ~kResultDraftRows);
    if (uint64_t(tele_count) * kTelemetryBytes != tele_bytes)
        bad("dist RESULT: telemetry_bytes {} is not {} * telemetry_count ({})", tele_bytes, kTelemetryBytes,
            tele_count);
    switch (m.kind) {
        case ResultKind::ack:
            // Upstream reports an error as status 1 with the message as an ACK's payload.
            if (payload_bytes != 0 && m.status == kStatusOk)
                bad("dist RESULT: an ACK with {} payload bytes", payload_bytes);
            break;
        case ResultKind::hidden_state:
            if (!hidden_bits_ok(m.payload_bits))
                bad("dist RESULT: hidden-state payload_bits {} is not 32, 16 or 8", m.payload_bits);
            if (payload_bytes % (m.payload_bits / 8) != 0)
                bad("dist RESULT: payload_bytes {} is not a whole number of {}-bit values", payload_bytes,
                    m.payload_bits);
            break;
        case ResultKind::logits:
            if (m.payload_bits != 32) bad("dist RESULT: logits payload_bits {} is not 32", m.payload_bits);
            if (payload_bytes % 4 != 0) bad("dist RESULT: logits payload_bytes {} is not a multiple of 4", payload_bytes);
            break;
    }
    const uint64_t declared = uint64_t(tele_bytes) + payload_bytes;
    if (!draft) r.expect_rest(declared, "telemetry_bytes + payload_bytes");
    else r.need(declared + kDraftRowsFixedBytes, "telemetry_bytes + payload_bytes + draft rows");
    m.telemetry.resize(tele_count);
    for (Telemetry& t : m.telemetry) {
        for (uint32_t* f : {&t.layer_start, &t.layer_end, &t.route_index, &t.pos0, &t.n_tokens, &t.eval_usec,
                            &t.downstream_wait_usec, &t.forward_send_usec, &t.input_bytes, &t.output_bytes})
            *f = r.u32("telemetry");
    }
    const auto p = r.take(payload_bytes, "payload");
    m.payload.assign(p.begin(), p.end());
    if (draft) m.draft = read_draft_rows(r);
    return m;
}

SnapshotSaveReq decode_snapshot_save_req(std::span<const uint8_t> payload) {
    Reader r(payload, "SNAPSHOT_SAVE_REQ");
    SnapshotSaveReq m = read_save_req(r);
    r.expect_end();
    return m;
}

SnapshotBegin decode_snapshot_begin(std::span<const uint8_t> payload) {
    return decode_begin(payload, FrameType::snapshot_begin);
}

SnapshotLoadBegin decode_snapshot_load_begin(std::span<const uint8_t> payload) {
    SnapshotLoadBegin m;
    static_cast<SnapshotBegin&>(m) = decode_begin(payload, FrameType::snapshot_load_begin);
    return m;
}

SnapshotChunk decode_snapshot_chunk(std::span<const uint8_t> payload) {
    Reader r(payload, "SNAPSHOT_CHUNK");
    SnapshotChunk m;
    m.request_id = r.u64("request_hi/lo");
    const uint32_t n = r.u32("chunk_bytes");
    if (n > kSnapshotChunkBytes) bad("dist SNAPSHOT_CHUNK: chunk_bytes {} exceeds {}", n, kSnapshotChunkBytes);
    r.expect_rest(n, "chunk_bytes");
    const auto d = r.take(n, "chunk data");
    m.data.assign(d.begin(), d.end());
    return m;
}

SnapshotDone decode_snapshot_done(std::span<const uint8_t> payload) {
    Reader r(payload, "SNAPSHOT_DONE");
    SnapshotDone m;
    m.request_id = r.u64("request_hi/lo");
    m.status = r.u32("status");
    const uint32_t n = r.u32("message_bytes");
    r.expect_rest(n, "message_bytes");
    m.message = as_string(r.take(n, "message"));
    return m;
}

Message decode(const Frame& f) {
    switch (f.type) {
        case FrameType::hello: return decode_hello(f.payload);
        case FrameType::error: return decode_error(f.payload);
        case FrameType::work: return decode_work(f.payload);
        case FrameType::result: return decode_result(f.payload);
        case FrameType::snapshot_save_req: return decode_snapshot_save_req(f.payload);
        case FrameType::snapshot_begin: return decode_snapshot_begin(f.payload);
        case FrameType::snapshot_chunk: return decode_snapshot_chunk(f.payload);
        case FrameType::snapshot_done: return decode_snapshot_done(f.payload);
        case FrameType::snapshot_load_begin: return decode_snapshot_load_begin(f.payload);
        case FrameType::identity: return decode_identity(f.payload);
    }
    bad("dist: unknown frame type {}", static_cast<uint32_t>(f.type));
}

// ---- framing ----

FrameHeader decode_header(std::span<const uint8_t, kHeaderBytes> h, uint32_t max_payload) {
    Reader r(h, "frame header");
    const uint32_t magic = r.u32("magic");
    const uint32_t type = r.u32("type");
    const uint32_t bytes = r.u32("bytes");
    if (magic != kMagic) bad("dist: bad frame magic {:#010x} (expected {:#010x} \"DS4D\")", magic, kMagic);
    if ((type < 1 || type > 9) && type != uint32_t(FrameType::identity)) bad("dist: unknown frame type {}", type);
    const auto t = static_cast<FrameType>(type);
    if (bytes > max_payload)
        bad("dist {}: declared payload of {} bytes exceeds the maximum {}", frame_type_name(t), bytes, max_payload);
    if (bytes < fixed_bytes(t))
        bad("dist {}: declared payload of {} bytes is shorter than its {}-byte fixed record", frame_type_name(t), bytes,
            fixed_bytes(t));
    if (t == FrameType::snapshot_save_req && bytes != kSnapshotSaveReqBytes)
        bad("dist SNAPSHOT_SAVE_REQ: declared payload of {} bytes, the record is {}", bytes, kSnapshotSaveReqBytes);
    return {t, bytes};
}

std::vector<Frame> FrameReader::feed(std::span<const uint8_t> bytes) {
    if (failed_) throw ProtocolError("dist: frame stream is out of step after an earlier protocol error");
    std::vector<Frame> out;
    try {
        while (!bytes.empty()) {
            if (!in_payload_) {
                const size_t n = std::min(kHeaderBytes - header_have_, bytes.size());
                std::memcpy(header_ + header_have_, bytes.data(), n);
                header_have_ += n;
                bytes = bytes.subspan(n);
                if (header_have_ < kHeaderBytes) break;
                current_ = decode_header(std::span<const uint8_t, kHeaderBytes>(header_, kHeaderBytes), max_payload_);
                in_payload_ = true;
                payload_.clear();
            }
            // Grow with what arrived, not to the declared size: a peer that declares a large
            // frame and stalls holds only the bytes it really sent.
            const size_t n = std::min(size_t(current_.bytes) - payload_.size(), bytes.size());
            payload_.insert(payload_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
            bytes = bytes.subspan(n);
            if (payload_.size() == current_.bytes) {
                out.push_back(Frame{current_.type, std::move(payload_)});
                payload_ = {};
                header_have_ = 0;
                in_payload_ = false;
            }
        }
    } catch (...) {
        failed_ = true;
        throw;
    }
    return out;
}

uint64_t token_hash(uint64_t prev, std::span<const int32_t> tokens) {
    uint64_t h = prev;
    for (int32_t t : tokens) {
        const uint32_t u = static_cast<uint32_t>(t);
        for (int i = 0; i < 4; ++i) {
            h ^= (u >> (8 * i)) & 0xFF;
            h *= kTokenHashPrime;
        }
    }
    return h;
}

}  // namespace ds4::dist
