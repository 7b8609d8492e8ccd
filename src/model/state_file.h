// The byte format of a saved sequence state (docs/STATE_FORMAT.md): a versioned header with the
// model's identity and layer range, the token history, optional next-token logits, one section
// per layer (written by the model family), an optional drafter section (a speculative drafter's
// own state, flag bit 1), and an XXH3-64 checksum of everything before it.
// All integers and floats little-endian.
//
// The reader checks the checksum before it parses anything, and every length against the
// bytes that remain before it allocates; a bad input is a ds4::Error saying what and where.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/layer_range.h"
#include "model/model.h"

namespace ds4::model {

inline constexpr char kStateMagic[8] = {'D', 'S', '4', 'S', 'T', 'A', 'T', 'E'};
inline constexpr uint32_t kStateVersion = 1;

struct StateHeader {
    std::string architecture;            // at most 15 bytes
    std::array<uint8_t, 16> metadata_hash{};
    uint32_t n_layer = 0;                // of the whole model
    LayerRange range;                    // the layers whose sections follow
    int64_t ctx = 0;                     // the saving sequence's context (informational)
    bool qat = true;
    std::vector<int32_t> tokens;
    std::vector<float> logits;           // empty, or [n_vocab] after the last token
};

// The header of a state of `seq` saved by a model described by `info`, with optional next-token
// logits ([info.n_vocab]; throws ds4::Error for another length). Family-neutral.
StateHeader state_header(const ModelInfo& info, const Sequence& seq, std::span<const float> logits);
// Checks a read header against the loading model (`path` its file, for messages) and the
// sequence the state goes into: architecture, metadata hash, layer range, room in the context,
// token ids, logits length, and (`check_qat`, for families whose state depends on it) the QAT
// flag. Throws ds4::Error saying what differs.
void check_state_header(const StateHeader& h, const ModelInfo& info, const std::string& path,
                        const SequenceOptions& target, bool check_qat);

class StateWriter {
public:
    explicit StateWriter(const StateHeader& h);
    void u32(uint32_t v) { put(&v, 4); }
    void u64(uint64_t v) { put(&v, 8); }
    void floats(const float* p, size_t n) { put(p, n * sizeof(float)); }
    void bytes(const void* p, size_t n) { put(p, n); }
    // A layer section: begin, the family's fields, end (which fills in the section's length).
    void begin_layer(uint32_t layer, const std::array<uint8_t, 16>& layer_hash);
    void end_layer();
    // Appends the checksum and hands the bytes over.
    std::vector<uint8_t> finish();

private:
    void put(const void* p, size_t n);
    std::vector<uint8_t> buf_;
    size_t section_at_ = 0;
};

class StateReader {
public:
    // Checks the checksum, magic and version and reads the header. `name` prefixes errors.
    StateReader(std::span<const uint8_t> bytes, std::string name);
    const StateHeader& header() const { return h_; }

    uint32_t u32(const char* what);
    uint64_t u64(const char* what);
    // n floats; n is checked against the bytes left before anything is allocated, and a
    // non-finite value (NaN, infinity) is an error; `banned_ok` lets -infinity through (saved
    // logits: a benchmark's banned EOS).
    std::vector<float> floats(uint64_t n, const char* what, bool banned_ok = false);
    // Starts layer section `layer` (the next in order) and returns its recorded layer hash;
    // end_layer() checks the section was read exactly.
    std::array<uint8_t, 16> begin_layer(uint32_t layer);
    // The rest of the current layer section as it is, consumed (for merging and cutting states).
    std::span<const uint8_t> layer_bytes();
    void end_layer();
    // After the last layer section: reads the drafter section when the flags announce one,
    // then checks every byte was read.
    void finish();
    // The drafter section's kind and bytes (valid with the reader's input), after finish().
    const std::string& drafter_kind() const { return drafter_kind_; }
    std::span<const uint8_t> drafter_bytes() const { return drafter_; }
    [[noreturn]] void bad(const std::string& why) const;

private:
    void get(void* p, size_t n, const char* what);
    std::span<const uint8_t> b_;   // without the checksum
    size_t at_ = 0, section_end_ = 0;
    std::string name_;
    StateHeader h_;
    bool has_drafter_ = false;
    std::string drafter_kind_;
    std::span<const uint8_t> drafter_;
};

// The drafter section (docs/STATE_FORMAT.md, "Drafter section"): a speculative drafter's own
// state, tagged with its kind (at most 15 bytes, e.g. "mtp", "dspark"), after a state's layer
// sections. with_drafter_section returns `state` (which must have none) with the section added,
// flag bit 1 set and a new checksum; drafter_section reads it back (nullopt: the state has
// none). Both check the whole state and throw ds4::Error as StateReader does.
struct DrafterSection {
    std::string kind;
    std::vector<uint8_t> bytes;
};
std::vector<uint8_t> with_drafter_section(std::span<const uint8_t> state, const DrafterSection& section);
std::optional<DrafterSection> drafter_section(std::span<const uint8_t> state);

// States of layer ranges (docs/STATE_FORMAT.md, "States of layer ranges"). merge_range_states
// joins states of consecutive ranges of one model (same architecture, metadata hash, layer count,
// QAT flag and tokens; each range starting where the previous ended) into one state of
// `range` (their union; `range.output` says whether it ends with the head), with `logits`
// (empty: none) and the first part's ctx. cut_range_state keeps the sections of `range` (which
// the state must hold), without logits. Both check the inputs and throw ds4::Error.
std::vector<uint8_t> merge_range_states(const std::vector<std::span<const uint8_t>>& parts, LayerRange range,
                                        std::span<const float> logits);
std::vector<uint8_t> cut_range_state(std::span<const uint8_t> state, LayerRange range);

}  // namespace ds4::model
