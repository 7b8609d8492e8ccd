#include "kvcache/file_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/file_io.h"

namespace ds4::kvcache {
namespace {

// Header offsets (docs/KV_CACHE_FORMAT.md).
constexpr size_t kOffVersion = 8, kOffReason = 12, kOffFlags = 16, kOffPayloadVersion = 20,
                 kOffModel = 24, kOffTokens = 40, kOffCtx = 48, kOffCreated = 56,
                 kOffTextBytes = 64, kOffTextHash = 72, kOffPayloadBytes = 88, kOffToolBytes = 96,
                 kOffToolHash = 104, kOffHeaderHash = 112;
static_assert(kOffHeaderHash + 8 == kHeaderBytes);

template <class T>
void put(uint8_t* b, size_t at, T v) {
    std::memcpy(b + at, &v, sizeof v);
}
template <class T>
T get(const uint8_t* b, size_t at) {
    T v;
    std::memcpy(&v, b + at, sizeof v);
    return v;
}

std::array<uint8_t, kHeaderBytes> encode_header(const Header& h) {
    std::array<uint8_t, kHeaderBytes> b{};
    std::memcpy(b.data(), kMagic, 8);
    put<uint32_t>(b.data(), kOffVersion, kFormatVersion);
    put<uint32_t>(b.data(), kOffReason, uint32_t(h.reason));
    put<uint32_t>(b.data(), kOffFlags, h.flags);
    put<uint32_t>(b.data(), kOffPayloadVersion, h.payload_version);
    std::memcpy(b.data() + kOffModel, h.model_id.data(), 16);
    put<uint64_t>(b.data(), kOffTokens, h.tokens);
    put<uint64_t>(b.data(), kOffCtx, h.ctx);
    put<uint64_t>(b.data(), kOffCreated, h.created);
    put<uint64_t>(b.data(), kOffTextBytes, h.text_bytes);
    std::memcpy(b.data() + kOffTextHash, h.text_hash.data(), 16);
    put<uint64_t>(b.data(), kOffPayloadBytes, h.payload_bytes);
    put<uint64_t>(b.data(), kOffToolBytes, h.tool_bytes);
    put<uint64_t>(b.data(), kOffToolHash, h.tool_hash);
    put<uint64_t>(b.data(), kOffHeaderHash, XXH3_64bits(b.data(), kOffHeaderHash));
    return b;
}

std::vector<uint8_t> encode_tools(const ToolMap& tools) {
    std::vector<uint8_t> b(tool_section_bytes(tools));
    size_t at = 0;
    auto u32 = [&](uint32_t v) {
        std::memcpy(b.data() + at, &v, 4);
        at += 4;
    };
    u32(uint32_t(tools.size()));
    for (const auto& [id, dsml] : tools) {
        u32(uint32_t(id.size()));
        u32(uint32_t(dsml.size()));
        std::memcpy(b.data() + at, id.data(), id.size());
        at += id.size();
        std::memcpy(b.data() + at, dsml.data(), dsml.size());
        at += dsml.size();
    }
    return b;
}

int write_all(int fd, const void* p, size_t n) {
    const auto* c = static_cast<const char*>(p);
    while (n > 0) {
        const ssize_t w = ::write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno;
        if (w == 0) return EIO;
        c += w;
        n -= size_t(w);
    }
    return 0;
}

// Reads [at, at + n) in chunks into the hash state and, when dst is given, into dst.
void read_hashed(Source& src, void* dst, uint64_t n, uint64_t at, XXH3_state_t* st) {
    if (n == 0) return;
    if (dst) {
        src.read(dst, size_t(n), at);
        XXH3_64bits_update(st, dst, size_t(n));
        return;
    }
    std::vector<uint8_t> buf(size_t(std::min<uint64_t>(n, 1 << 20)));
    while (n > 0) {
        const size_t k = size_t(std::min<uint64_t>(n, buf.size()));
        src.read(buf.data(), k, at);
        XXH3_64bits_update(st, buf.data(), k);
        at += k;
        n -= k;
    }
}

[[noreturn]] void bad(Cause c, const std::string& name, const std::string& why) {
    throw FormatError(c, name + ": " + why);
}

}  // namespace

const char* cause_name(Cause c) {
    switch (c) {
        case Cause::checksum: return "checksum";
        case Cause::truncated: return "truncated";
        case Cause::foreign: return "foreign";
        case Cause::io: return "io";
    }
    return "?";
}

uint64_t Header::file_bytes() const {
    return kvcache::file_bytes(text_bytes, payload_bytes, tool_bytes);
}

TextHash text_hash(std::string_view text) {
    const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    TextHash out;
    std::memcpy(out.data(), c.digest, 16);
    return out;
}

std::string hex(const TextHash& h) {
    static const char digits[] = "0123456789abcdef";
    std::string s;
    for (uint8_t c : h) s += {digits[c >> 4], digits[c & 15]};
    return s;
}

std::string file_name(std::string_view text) { return hex(text_hash(text)) + ".kv"; }

uint64_t tool_section_bytes(const ToolMap& tools) {
    uint64_t n = 4;
    for (const auto& [id, dsml] : tools) n += 8 + id.size() + dsml.size();
    return n;
}

uint64_t file_bytes(uint64_t text_bytes, uint64_t payload_bytes, uint64_t tool_bytes) {
    return kHeaderBytes + text_bytes + payload_bytes + tool_bytes + kChecksumBytes + kStatsBytes;
}

void SpanSource::read(void* dst, size_t n, uint64_t at) {
    if (at > b_.size() || n > b_.size() - at) throw FormatError(Cause::io, "read past the end");
    if (n) std::memcpy(dst, b_.data() + at, n);
}

void FdSource::read(void* dst, size_t n, uint64_t at) {
    auto* p = static_cast<char*>(dst);
    while (n > 0) {
        const ssize_t r = ::pread(fd_, p, n, off_t(at));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) bad(Cause::io, name_, std::string("read failed: ") + std::strerror(errno));
        if (r == 0) bad(Cause::truncated, name_, "file ends early");
        p += r;
        at += uint64_t(r);
        n -= size_t(r);
    }
}

Header read_header(Source& src, const Expect& expect, const std::string& name) {
    const uint64_t size = src.size();
    if (size < kHeaderBytes + kChecksumBytes + kStatsBytes)
        bad(Cause::truncated, name, "only " + std::to_string(size) + " bytes");
    uint8_t b[kHeaderBytes];
    src.read(b, kHeaderBytes, 0);
    if (std::memcmp(b, kMagic, 8) != 0) bad(Cause::foreign, name, "not a ds4 kv cache file");
    const uint32_t version = get<uint32_t>(b, kOffVersion);
    if (version != kFormatVersion)
        bad(Cause::foreign, name, "format version " + std::to_string(version) + ", expected " +
                                      std::to_string(kFormatVersion));
    if (XXH3_64bits(b, kOffHeaderHash) != get<uint64_t>(b, kOffHeaderHash))
        bad(Cause::checksum, name, "header checksum mismatch");
    Header h;
    const uint32_t reason = get<uint32_t>(b, kOffReason);
    h.flags = get<uint32_t>(b, kOffFlags);
    h.payload_version = get<uint32_t>(b, kOffPayloadVersion);
    std::memcpy(h.model_id.data(), b + kOffModel, 16);
    h.tokens = get<uint64_t>(b, kOffTokens);
    h.ctx = get<uint64_t>(b, kOffCtx);
    h.created = get<uint64_t>(b, kOffCreated);
    h.text_bytes = get<uint64_t>(b, kOffTextBytes);
    std::memcpy(h.text_hash.data(), b + kOffTextHash, 16);
    h.payload_bytes = get<uint64_t>(b, kOffPayloadBytes);
    h.tool_bytes = get<uint64_t>(b, kOffToolBytes);
    h.tool_hash = get<uint64_t>(b, kOffToolHash);
    if (h.model_id != expect.model_id) bad(Cause::foreign, name, "written by another model");
    if (h.payload_version != expect.payload_version)
        bad(Cause::foreign, name, "state payload version " + std::to_string(h.payload_version) +
                                      ", expected " + std::to_string(expect.payload_version));
    if (h.flags != 0) bad(Cause::foreign, name, "unknown flags " + std::to_string(h.flags));
    if (reason > kMaxSaveReason) bad(Cause::foreign, name, "unknown save reason " + std::to_string(reason));
    h.reason = SaveReason(reason);
    if (h.tokens > (uint64_t(1) << 40) || h.ctx > (uint64_t(1) << 40))
        bad(Cause::foreign, name, "implausible token count or context");
    // Each part is checked alone first, so the sum cannot wrap.
    if (h.text_bytes > size || h.payload_bytes > size || h.tool_bytes > size)
        bad(Cause::truncated, name, "a section is longer than the file's " + std::to_string(size) + " bytes");
    if (h.file_bytes() != size)
        bad(Cause::truncated, name, "header says " + std::to_string(h.file_bytes()) +
                                        " bytes, the file has " + std::to_string(size));
    if (h.tool_bytes < 4) bad(Cause::truncated, name, "tool map section shorter than its count");
    return h;
}

ToolMap read_tools(Source& src, const Header& h, const std::string& name) {
    std::vector<uint8_t> b(size_t(h.tool_bytes));  // within the file: read_header checked it
    src.read(b.data(), b.size(), kHeaderBytes + h.text_bytes + h.payload_bytes);
    if (XXH3_64bits(b.data(), b.size()) != h.tool_hash) bad(Cause::checksum, name, "tool map checksum mismatch");
    size_t at = 0;
    auto u32 = [&]() {
        if (b.size() - at < 4) bad(Cause::truncated, name, "tool map ends inside an entry");
        uint32_t v;
        std::memcpy(&v, b.data() + at, 4);
        at += 4;
        return v;
    };
    const uint32_t count = u32();
    if (count > (b.size() - at) / 8) bad(Cause::truncated, name, "tool map count exceeds its section");
    ToolMap tools;
    tools.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
        const uint32_t id_len = u32(), dsml_len = u32();
        if (uint64_t(id_len) + dsml_len > b.size() - at)
            bad(Cause::truncated, name, "tool map entry " + std::to_string(i) + " exceeds its section");
        std::string id(reinterpret_cast<const char*>(b.data() + at), id_len);
        at += id_len;
        std::string dsml(reinterpret_cast<const char*>(b.data() + at), dsml_len);
        at += dsml_len;
        tools.emplace_back(std::move(id), std::move(dsml));
    }
    if (at != b.size()) bad(Cause::truncated, name, "tool map section has trailing bytes");
    return tools;
}

FileStats read_stats(Source& src, const Header& h) {
    uint8_t b[kStatsBytes];
    FileStats s{0, h.created};
    try {
        src.read(b, kStatsBytes, h.file_bytes() - kStatsBytes);
    } catch (const FormatError&) {
        return s;
    }
    if (XXH3_64bits(b, 12) != get<uint64_t>(b, 12)) return s;
    s.hits = get<uint32_t>(b, 0);
    s.last_used = get<uint64_t>(b, 4);
    return s;
}

std::array<uint8_t, kStatsBytes> encode_stats(const FileStats& s) {
    std::array<uint8_t, kStatsBytes> b{};
    put<uint32_t>(b.data(), 0, s.hits);
    put<uint64_t>(b.data(), 4, s.last_used);
    put<uint64_t>(b.data(), 12, XXH3_64bits(b.data(), 12));
    return b;
}

Entry read_entry(Source& src, const Expect& expect, const std::string& name) {
    Entry e;
    e.header = read_header(src, expect, name);
    const Header& h = e.header;
    XXH3_state_t* st = XXH3_createState();
    if (!st) throw std::bad_alloc();
    struct Free {
        XXH3_state_t* s;
        ~Free() { XXH3_freeState(s); }
    } free_state{st};
    XXH3_64bits_reset(st);
    uint8_t hb[kHeaderBytes];
    src.read(hb, kHeaderBytes, 0);
    XXH3_64bits_update(st, hb, kHeaderBytes);
    e.text.resize(size_t(h.text_bytes));
    read_hashed(src, e.text.data(), h.text_bytes, kHeaderBytes, st);
    e.payload.resize(size_t(h.payload_bytes));
    read_hashed(src, e.payload.data(), h.payload_bytes, kHeaderBytes + h.text_bytes, st);
    const uint64_t tools_at = kHeaderBytes + h.text_bytes + h.payload_bytes;
    read_hashed(src, nullptr, h.tool_bytes, tools_at, st);
    uint64_t sum;
    src.read(&sum, 8, tools_at + h.tool_bytes);
    if (XXH3_64bits_digest(st) != sum) bad(Cause::checksum, name, "checksum mismatch");
    if (text_hash(e.text) != h.text_hash) bad(Cause::checksum, name, "text hash mismatch");
    e.tools = read_tools(src, h, name);
    e.stats = read_stats(src, h);
    return e;
}

int write_contents(int fd, std::string_view text, std::span<const uint8_t> payload,
                   const StoreMeta& meta, const ToolMap& tools, const Expect& id, uint64_t created) {
    const std::vector<uint8_t> tb = encode_tools(tools);
    Header h;
    h.reason = meta.reason;
    h.model_id = id.model_id;
    h.payload_version = id.payload_version;
    h.tokens = uint64_t(std::max<int64_t>(meta.tokens, 0));
    h.ctx = uint64_t(std::max<int64_t>(meta.ctx, 0));
    h.created = created;
    h.text_bytes = text.size();
    h.text_hash = text_hash(text);
    h.payload_bytes = payload.size();
    h.tool_bytes = tb.size();
    h.tool_hash = XXH3_64bits(tb.data(), tb.size());
    const auto hb = encode_header(h);
    XXH3_state_t* st = XXH3_createState();
    if (!st) return ENOMEM;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, hb.data(), hb.size());
    XXH3_64bits_update(st, text.data(), text.size());
    XXH3_64bits_update(st, payload.data(), payload.size());
    XXH3_64bits_update(st, tb.data(), tb.size());
    const uint64_t sum = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    const auto stats = encode_stats({0, created});
    if (int e = write_all(fd, hb.data(), hb.size())) return e;
    if (int e = write_all(fd, text.data(), text.size())) return e;
    if (int e = write_all(fd, payload.data(), payload.size())) return e;
    if (int e = write_all(fd, tb.data(), tb.size())) return e;
    if (int e = write_all(fd, &sum, 8)) return e;
    return write_all(fd, stats.data(), stats.size());
}

void write_file(const std::string& path, std::string_view text, std::span<const uint8_t> payload,
                const StoreMeta& meta, const ToolMap& tools, const ModelId& model_id,
                uint32_t payload_version) {
    // A device or FIFO there would be replaced by the rename (as root, `/save /dev/full` turned
    // the device into a file): a state is only ever a regular file.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        fail("{}: is {}, not a regular file; a state is saved only as a regular file", path, file_kind(st.st_mode));
    static std::atomic<uint64_t> counter{0};
    const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) fail("{}: cannot create {}: {}", path, tmp, std::strerror(errno));
    int err = write_contents(fd, text, payload, meta, tools, {model_id, payload_version}, uint64_t(time(nullptr)));
    if (!err && ::fsync(fd) != 0) err = errno;
    if (::close(fd) != 0 && !err) err = errno;
    if (!err && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
    if (err) {
        ::unlink(tmp.c_str());
        fail("{}: write failed: {}", path, std::strerror(err));
    }
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

Entry read_file(const std::string& path, const ModelId& model_id, uint32_t payload_version) {
    int fd = -1;
    try {
        fd = open_regular(path, O_RDONLY);  // never waits on a FIFO
    } catch (const Error& e) {
        const std::string what = e.what();
        bad(Cause::io, path, what.substr(std::min(what.size(), path.size() + 2)));
    }
    struct Close {
        int fd;
        ~Close() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (fstat(fd, &st) != 0) bad(Cause::io, path, std::string("cannot stat: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) bad(Cause::io, path, "not a regular file");
    FdSource src(fd, uint64_t(st.st_size), path);
    return read_entry(src, {model_id, payload_version}, path);
}

}  // namespace ds4::kvcache
