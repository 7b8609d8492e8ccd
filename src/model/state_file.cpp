#include "model/state_file.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <cmath>
#include <cstring>

#include "common/error.h"

namespace ds4::model {
namespace {

constexpr uint32_t kFlagLogits = 1;
constexpr uint32_t kFlagDrafter = 2;   // a drafter section follows the layer sections
constexpr uint32_t kDrafterVersion = 1;
constexpr size_t kArchBytes = 16;
constexpr size_t kKindBytes = 16;

}  // namespace

StateWriter::StateWriter(const StateHeader& h) {
    if (h.architecture.size() >= kArchBytes) fail("state: architecture name '{}' too long", h.architecture);
    bytes(kStateMagic, 8);
    u32(kStateVersion);
    u32(h.logits.empty() ? 0 : kFlagLogits);
    char arch[kArchBytes] = {};
    std::memcpy(arch, h.architecture.data(), h.architecture.size());
    bytes(arch, kArchBytes);
    bytes(h.metadata_hash.data(), 16);
    u32(h.n_layer);
    u32(h.range.first);
    u32(h.range.last);
    u32(h.range.output ? 1 : 0);
    u64(uint64_t(h.ctx));
    u32(h.qat ? 1 : 0);
    u64(h.tokens.size());
    for (int32_t t : h.tokens) u32(uint32_t(t));
    if (!h.logits.empty()) {
        u64(h.logits.size());
        floats(h.logits.data(), h.logits.size());
    }
}

void StateWriter::put(const void* p, size_t n) {
    // resize + memcpy rather than insert(end, p, p + n): GCC 12 warns (-Wstringop-overflow) on
    // the insert into the still empty buffer once the constructor inlines it.
    const size_t at = buf_.size();
    buf_.resize(at + n);
    if (n) std::memcpy(buf_.data() + at, p, n);
}

void StateWriter::begin_layer(uint32_t layer, const std::array<uint8_t, 16>& layer_hash) {
    u32(layer);
    bytes(layer_hash.data(), 16);
    section_at_ = buf_.size();
    u64(0);  // section length, filled in by end_layer()
}

void StateWriter::end_layer() {
    const uint64_t len = buf_.size() - section_at_ - 8;
    std::memcpy(&buf_[section_at_], &len, 8);
}

std::vector<uint8_t> StateWriter::finish() {
    const uint64_t sum = XXH3_64bits(buf_.data(), buf_.size());
    u64(sum);
    return std::move(buf_);
}

StateReader::StateReader(std::span<const uint8_t> bytes, std::string name) : name_(std::move(name)) {
    if (bytes.size() < 8 + 8 || std::memcmp(bytes.data(), kStateMagic, 8) != 0)
        fail("{}: not a ds4 state (no DS4STATE magic)", name_);
    b_ = bytes.first(bytes.size() - 8);
    uint64_t sum;
    std::memcpy(&sum, bytes.data() + b_.size(), 8);
    if (XXH3_64bits(b_.data(), b_.size()) != sum)
        fail("{}: checksum mismatch: the state is corrupted or truncated ({} bytes)", name_, bytes.size());
    at_ = 8;
    const uint32_t version = u32("version");
    if (version != kStateVersion)
        bad(fmt::format("format version {}, this build reads version {}", version, kStateVersion));
    const uint32_t flags = u32("flags");
    if (flags & ~(kFlagLogits | kFlagDrafter)) bad(fmt::format("unknown flags 0x{:x}", flags));
    has_drafter_ = flags & kFlagDrafter;
    char arch[kArchBytes];
    get(arch, kArchBytes, "architecture");
    if (arch[kArchBytes - 1] != 0) bad("architecture name not terminated");
    h_.architecture = arch;
    get(h_.metadata_hash.data(), 16, "metadata hash");
    h_.n_layer = u32("layer count");
    h_.range.first = u32("first layer");
    h_.range.last = u32("last layer");
    const uint32_t output = u32("output flag");
    if (output > 1) bad(fmt::format("output flag {}", output));
    h_.range.output = output == 1;
    if (h_.range.first > h_.range.last || h_.range.last >= h_.n_layer ||
        (h_.range.output && h_.range.last + 1 != h_.n_layer))
        bad(fmt::format("layer range {}..{} of {} layers", h_.range.first, h_.range.last, h_.n_layer));
    h_.ctx = int64_t(u64("context"));
    const uint32_t qat = u32("qat flag");
    if (qat > 1) bad(fmt::format("qat flag {}", qat));
    h_.qat = qat == 1;
    const uint64_t n = u64("token count");
    if (n > (b_.size() - at_) / 4) bad(fmt::format("{} tokens in {} bytes", n, b_.size() - at_));
    h_.tokens.resize(n);
    for (auto& t : h_.tokens) {
        const uint32_t v = u32("token");
        if (v > uint32_t(INT32_MAX)) bad(fmt::format("token id {}", v));
        t = int32_t(v);
    }
    if (flags & kFlagLogits) {
        const uint64_t nv = u64("logit count");
        h_.logits = floats(nv, "logits", true);
    }
}

void StateReader::bad(const std::string& why) const { fail("{}: byte {}: {}", name_, at_, why); }

void StateReader::get(void* p, size_t n, const char* what) {
    if (n > b_.size() - at_) bad(fmt::format("truncated: {} needs {} bytes, {} left", what, n, b_.size() - at_));
    if (section_end_ && at_ + n > section_end_) bad(fmt::format("{} runs past the end of its layer section", what));
    if (n == 0) return;  // (p may be null: an empty vector's data())
    std::memcpy(p, b_.data() + at_, n);
    at_ += n;
}

uint32_t StateReader::u32(const char* what) {
    uint32_t v;
    get(&v, 4, what);
    return v;
}

uint64_t StateReader::u64(const char* what) {
    uint64_t v;
    get(&v, 8, what);
    return v;
}

std::vector<float> StateReader::floats(uint64_t n, const char* what, bool banned_ok) {
    const size_t left = (section_end_ ? section_end_ : b_.size()) - at_;
    if (n > left / sizeof(float)) bad(fmt::format("{}: {} floats in {} bytes", what, n, left));
    std::vector<float> v(n);
    get(v.data(), n * sizeof(float), what);
    // A model never writes NaN or infinity into a state; one that holds them (a file forged
    // with recomputed checksums) would poison every answer continued from it.
    for (size_t i = 0; i < v.size(); ++i)
        if (!std::isfinite(v[i]) && !(banned_ok && v[i] < 0 && std::isinf(v[i])))
            bad(fmt::format("{}: value {} of {} is not finite", what, i, n));
    return v;
}

std::array<uint8_t, 16> StateReader::begin_layer(uint32_t layer) {
    const uint32_t got = u32("layer index");
    if (got != layer) bad(fmt::format("layer section {} where layer {} was expected", got, layer));
    std::array<uint8_t, 16> h;
    get(h.data(), 16, "layer hash");
    const uint64_t len = u64("section length");
    if (len > b_.size() - at_) bad(fmt::format("layer {} section of {} bytes, {} left", layer, len, b_.size() - at_));
    section_end_ = at_ + len;
    return h;
}

std::span<const uint8_t> StateReader::layer_bytes() {
    if (!section_end_) bad("no layer section open");
    const auto s = b_.subspan(at_, section_end_ - at_);
    at_ = section_end_;
    return s;
}

void StateReader::end_layer() {
    if (at_ != section_end_) bad(fmt::format("{} bytes left unread in a layer section", section_end_ - at_));
    section_end_ = 0;
}

void StateReader::finish() {
    if (has_drafter_ && drafter_kind_.empty()) {
        const uint32_t version = u32("drafter section version");
        if (version != kDrafterVersion)
            bad(fmt::format("drafter section version {}, this build reads version {}", version, kDrafterVersion));
        char kind[kKindBytes];
        get(kind, kKindBytes, "drafter kind");
        if (kind[kKindBytes - 1] != 0 || kind[0] == 0) bad("drafter kind empty or not terminated");
        drafter_kind_ = kind;
        const uint64_t len = u64("drafter section length");
        if (len > b_.size() - at_) bad(fmt::format("drafter section of {} bytes, {} left", len, b_.size() - at_));
        drafter_ = b_.subspan(at_, size_t(len));
        at_ += size_t(len);
    }
    if (at_ != b_.size())
        bad(fmt::format("{} bytes after the last {}", b_.size() - at_, has_drafter_ ? "section" : "layer section"));
}

namespace {

// Reads a whole state through its layer sections (as they are) and finish().
void skim(StateReader& r) {
    const StateHeader& h = r.header();
    for (uint32_t il = h.range.first; il <= h.range.last; ++il) {
        r.begin_layer(il);
        r.layer_bytes();
        r.end_layer();
    }
    r.finish();
}

}  // namespace

std::vector<uint8_t> with_drafter_section(std::span<const uint8_t> state, const DrafterSection& section) {
    StateReader r(state, "state");
    skim(r);
    if (!r.drafter_kind().empty()) fail("state: it has a drafter section already");
    if (section.kind.empty() || section.kind.size() >= kKindBytes || section.kind.find('\0') != std::string::npos)
        fail("state: drafter kind '{}' is not 1 to {} bytes", section.kind, kKindBytes - 1);
    std::vector<uint8_t> out(state.begin(), state.end() - 8);
    uint32_t flags;
    std::memcpy(&flags, out.data() + 12, 4);
    flags |= kFlagDrafter;
    std::memcpy(out.data() + 12, &flags, 4);
    auto put = [&](const void* p, size_t n) {
        const size_t at = out.size();
        out.resize(at + n);
        if (n) std::memcpy(out.data() + at, p, n);
    };
    put(&kDrafterVersion, 4);
    char kind[kKindBytes] = {};
    std::memcpy(kind, section.kind.data(), section.kind.size());
    put(kind, kKindBytes);
    const uint64_t len = section.bytes.size();
    put(&len, 8);
    put(section.bytes.data(), section.bytes.size());
    const uint64_t sum = XXH3_64bits(out.data(), out.size());
    put(&sum, 8);
    return out;
}

std::optional<DrafterSection> drafter_section(std::span<const uint8_t> state) {
    StateReader r(state, "state");
    skim(r);
    if (r.drafter_kind().empty()) return std::nullopt;
    return DrafterSection{r.drafter_kind(), {r.drafter_bytes().begin(), r.drafter_bytes().end()}};
}

std::vector<uint8_t> merge_range_states(const std::vector<std::span<const uint8_t>>& parts, LayerRange range,
                                        std::span<const float> logits) {
    if (parts.empty()) fail("merging states: no parts");
    std::vector<StateReader> readers;
    for (size_t i = 0; i < parts.size(); ++i) readers.emplace_back(parts[i], fmt::format("state part {}", i));
    const StateHeader& h0 = readers[0].header();
    uint32_t next = range.first;
    for (size_t i = 0; i < readers.size(); ++i) {
        const StateHeader& h = readers[i].header();
        if (h.architecture != h0.architecture || h.metadata_hash != h0.metadata_hash || h.n_layer != h0.n_layer)
            fail("merging states: part {} belongs to another model", i);
        if (h.qat != h0.qat) fail("merging states: part {} has another QAT flag", i);
        if (h.tokens != h0.tokens)
            fail("merging states: part {} holds other tokens ({} vs {})", i, h.tokens.size(), h0.tokens.size());
        if (h.range.first != next)
            fail("merging states: part {} holds layers {}, expected layer {} next", i, h.range.str(), next);
        next = h.range.last + 1;
    }
    if (next != range.last + 1) fail("merging states: the parts end at layer {}, not {}", next - 1, range.last);
    StateHeader out = h0;
    out.range = range;
    out.logits.assign(logits.begin(), logits.end());
    StateWriter w(out);
    for (StateReader& r : readers) {
        for (uint32_t il = r.header().range.first; il <= r.header().range.last; ++il) {
            const auto hash = r.begin_layer(il);
            const auto bytes = r.layer_bytes();
            r.end_layer();
            w.begin_layer(il, hash);
            w.bytes(bytes.data(), bytes.size());
            w.end_layer();
        }
        r.finish();
    }
    return w.finish();
}

std::vector<uint8_t> cut_range_state(std::span<const uint8_t> state, LayerRange range) {
    StateReader r(state, "state");
    const StateHeader& h = r.header();
    if (range.first < h.range.first || range.last > h.range.last)
        fail("state: holds layers {}, not {}", h.range.str(), range.str());
    StateHeader out = h;
    out.range = range;
    out.logits.clear();
    StateWriter w(out);
    for (uint32_t il = h.range.first; il <= h.range.last; ++il) {
        const auto hash = r.begin_layer(il);
        const auto bytes = r.layer_bytes();
        r.end_layer();
        if (!range.contains(il)) continue;
        w.begin_layer(il, hash);
        w.bytes(bytes.data(), bytes.size());
        w.end_layer();
    }
    r.finish();
    return w.finish();
}

StateHeader state_header(const ModelInfo& info, const Sequence& seq, std::span<const float> logits) {
    if (!logits.empty() && logits.size() != info.n_vocab)
        fail("save_state: {} logits for a vocabulary of {}", logits.size(), info.n_vocab);
    StateHeader h;
    h.architecture = info.architecture;
    h.metadata_hash = info.metadata_hash;
    h.n_layer = info.n_layer;
    h.range = info.range;
    h.ctx = seq.options().ctx;
    h.qat = seq.options().qat;
    h.tokens = seq.tokens();
    h.logits.assign(logits.begin(), logits.end());
    return h;
}

void check_state_header(const StateHeader& h, const ModelInfo& info, const std::string& path,
                        const SequenceOptions& target, bool check_qat) {
    if (h.architecture != info.architecture)
        fail("state: saved by a '{}' model, this is '{}'", h.architecture, info.architecture);
    if (h.metadata_hash != info.metadata_hash) fail("state: saved by another model (its metadata differs from {})", path);
    if (h.range != info.range) fail("state: holds layers {}, this model holds layers {}", h.range.str(), info.range.str());
    if (check_qat && h.qat != target.qat)
        fail("state: saved with the QAT simulation {}, the sequence has it {}", h.qat ? "on" : "off",
             target.qat ? "on" : "off");
    const int64_t pos = int64_t(h.tokens.size());
    if (pos > target.ctx) fail("state: {} tokens do not fit the sequence's context of {}", pos, target.ctx);
    for (int32_t t : h.tokens)
        if (uint32_t(t) >= info.n_vocab) fail("state: token id {} out of range [0, {})", t, info.n_vocab);
    if (!h.logits.empty() && h.logits.size() != info.n_vocab)
        fail("state: {} logits for a vocabulary of {}", h.logits.size(), info.n_vocab);
}

}  // namespace ds4::model
