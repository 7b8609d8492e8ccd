// The byte format of one disk KV cache file (docs/KV_CACHE_FORMAT.md): an immutable part --
// header, rendered prompt text, the opaque model-state payload, the tool-id map, an XXH3-64
// checksum over all of it -- followed by a small mutable stats record (hit count, last use) with
// its own checksum, rewritten in place. Little-endian, no padding.
//
// The reader checks every length against the file's size before it allocates, so a damaged or
// hostile file costs at most its own size in memory. Defects are FormatError with a Cause, so
// the cache can count them by kind.
//
// write_file()/read_file() are the single-file API (ds4's /save and /load): the same format,
// written atomically (temporary, fsync, rename, directory fsync), without a budget.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"

namespace ds4::kvcache {

using ModelId = std::array<uint8_t, 16>;
using TextHash = std::array<uint8_t, 16>;  // XXH3-128 of the text, canonical (big-endian) bytes
// Tool-call id -> the exact DSML block the model sampled for it, in file order.
using ToolMap = std::vector<std::pair<std::string, std::string>>;

inline constexpr char kMagic[8] = {'D', 'S', '4', 'K', 'V', 'C', 'A', 'C'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint64_t kHeaderBytes = 120;
inline constexpr uint64_t kChecksumBytes = 8;
inline constexpr uint64_t kStatsBytes = 20;  // u32 hits, u64 last used, u64 XXH3-64 of those 12

// Why a snapshot was written (PRODUCT.md §5.3). Stored, reported, never interpreted here.
enum class SaveReason : uint32_t { unknown = 0, cold = 1, continued = 2, evict = 3, shutdown = 4, manual = 5 };
inline constexpr uint32_t kMaxSaveReason = 5;

// What is wrong with a file that does not read.
enum class Cause {
    checksum,   // a checksum or the text hash does not match: the bytes changed
    truncated,  // the file is shorter (or longer) than its header says
    foreign,    // not ours to read: another magic, format version, model or payload version
    io,         // the file could not be opened or read
};
const char* cause_name(Cause c);

class FormatError : public Error {
public:
    FormatError(Cause cause, const std::string& what) : Error(what), cause_(cause) {}
    Cause cause() const { return cause_; }

private:
    Cause cause_;
};

struct StoreMeta {
    SaveReason reason = SaveReason::unknown;
    int64_t tokens = 0;  // tokens the payload holds (>= 0)
    int64_t ctx = 0;     // the context size the snapshot was written for (>= 0)
};

// The immutable header, decoded.
struct Header {
    SaveReason reason = SaveReason::unknown;
    uint32_t flags = 0;  // reserved: 0 in format version 1
    ModelId model_id{};
    uint32_t payload_version = 0;
    uint64_t tokens = 0;
    uint64_t ctx = 0;
    uint64_t created = 0;  // unix seconds
    uint64_t text_bytes = 0;
    TextHash text_hash{};
    uint64_t payload_bytes = 0;
    uint64_t tool_bytes = 0;  // the tool-map section, count included
    uint64_t tool_hash = 0;   // XXH3-64 of the tool-map section
    uint64_t file_bytes() const;  // the whole file, stats record included
};

// The mutable stats record. An invalid one reads as {0, created}.
struct FileStats {
    uint32_t hits = 0;
    uint64_t last_used = 0;
};

// One whole file, read and checked.
struct Entry {
    Header header;
    FileStats stats;
    std::string text;
    std::vector<uint8_t> payload;
    ToolMap tools;
};

// What a reader expects of a file: anything else is Cause::foreign.
struct Expect {
    ModelId model_id{};
    uint32_t payload_version = 0;
};

TextHash text_hash(std::string_view text);
std::string hex(const TextHash& h);
// "<32 hex digits of text_hash(text)>.kv"
std::string file_name(std::string_view text);
uint64_t tool_section_bytes(const ToolMap& tools);
// Size of a file holding these: header, text, payload, tool map, checksum, stats.
uint64_t file_bytes(uint64_t text_bytes, uint64_t payload_bytes, uint64_t tool_bytes);

// Where a reader gets its bytes: a file descriptor (pread) or memory (the fuzz target).
class Source {
public:
    virtual ~Source() = default;
    virtual uint64_t size() const = 0;
    // Exactly n bytes at offset `at` (which the caller has checked lie inside size()); throws
    // FormatError(io) when the read fails or comes up short.
    virtual void read(void* dst, size_t n, uint64_t at) = 0;
};

class SpanSource final : public Source {
public:
    explicit SpanSource(std::span<const uint8_t> b) : b_(b) {}
    uint64_t size() const override { return b_.size(); }
    void read(void* dst, size_t n, uint64_t at) override;

private:
    std::span<const uint8_t> b_;
};

class FdSource final : public Source {
public:
    // Does not own fd; `name` prefixes errors.
    FdSource(int fd, uint64_t size, std::string name) : fd_(fd), size_(size), name_(std::move(name)) {}
    uint64_t size() const override { return size_; }
    void read(void* dst, size_t n, uint64_t at) override;

private:
    int fd_;
    uint64_t size_;
    std::string name_;
};

// The header, checked: size, magic, version, header checksum, model, payload version, flags,
// reason, and that the section sizes add up to exactly the source's size. `name` prefixes errors.
Header read_header(Source& src, const Expect& expect, const std::string& name);
// The tool-map section of a checked header, verified against its own hash.
ToolMap read_tools(Source& src, const Header& h, const std::string& name);
// The stats record; an invalid one (torn write, flipped bit) reads as {0 hits, h.created}.
FileStats read_stats(Source& src, const Header& h);
// Everything, with the whole-file checksum and the text hash verified.
Entry read_entry(Source& src, const Expect& expect, const std::string& name);

// Writes a whole file to fd at its current offset (header from the arguments, stats {0,
// created}). Returns 0 or the errno of the failed write. `created` is unix seconds.
int write_contents(int fd, std::string_view text, std::span<const uint8_t> payload,
                   const StoreMeta& meta, const ToolMap& tools, const Expect& id, uint64_t created);
// Encodes a stats record (kStatsBytes).
std::array<uint8_t, kStatsBytes> encode_stats(const FileStats& s);

// Single-file API. write_file replaces `path` atomically: `<path>.tmp.<pid>.<n>`, fsync,
// rename, fsync of the directory; on failure the temporary is removed and ds4::Error thrown.
// A `path` that exists and is not a regular file (a device, a FIFO) is refused, never replaced.
void write_file(const std::string& path, std::string_view text, std::span<const uint8_t> payload,
                const StoreMeta& meta, const ToolMap& tools, const ModelId& model_id,
                uint32_t payload_version);
// Reads and checks a whole file; throws FormatError naming `path`. Anything but a regular file
// (a FIFO is never waited on) is refused.
Entry read_file(const std::string& path, const ModelId& model_id, uint32_t payload_version);

}  // namespace ds4::kvcache
