#include "gguf/reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.h"

namespace ds4::gguf {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF is read little-endian");

constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxKeyBytes = 65535;  // GGUF spec: keys are at most 2^16-1 bytes
// Smallest encodings, used to bound counts by the bytes left before anything is allocated:
// a key/value pair is key length (8) + 1 key byte + type (4) + a 1-byte value; a tensor info
// is name length (8) + n_dims (4) + one ne (8) + type (4) + offset (8).
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
// Array elements are held as variants of ~40 bytes, so a file of 1-byte elements would cost
// 40x its size in memory. Real models need about 0.5M (a 129k vocabulary, its types and
// merges); this budget over all arrays keeps a hostile file from exhausting memory.
constexpr uint64_t kMaxArrayElements = uint64_t(1) << 24;

// Encoded size of a fixed-size value type; 0 for STRING/ARRAY.
uint64_t fixed_size(ValueType t) {
    switch (t) {
        case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
        case ValueType::UINT16: case ValueType::INT16: return 2;
        case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
        case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
        default: return 0;
    }
}

// A key or tensor name as it appears in a message: control bytes escaped (a hostile name
// must not break the one-line message) and long names cut.
std::string shown(const std::string& name) {
    std::string out;
    for (size_t i = 0; i < name.size() && i < 96; ++i) {
        const auto c = static_cast<unsigned char>(name[i]);
        out += (c < 0x20 || c == 0x7f) ? fmt::format("\\x{:02x}", c) : std::string(1, char(c));
    }
    if (name.size() > 96) out += fmt::format("...({} bytes)", name.size());
    return out;
}

// Bounds-checked little-endian reads over the image. Every failure names the file and the
// byte offset where the offending field starts.
class Cursor {
public:
    Cursor(std::span<const uint8_t> b, const std::string& name) : b_(b), name_(name) {}

    uint64_t pos() const { return pos_; }
    uint64_t left() const { return b_.size() - pos_; }

    template <class... Args>
    [[noreturn]] void fail_at(uint64_t at, fmt::format_string<Args...> f, Args&&... args) const {
        throw Error(fmt::format("{}: at byte {}: {}", name_, at,
                                fmt::format(f, std::forward<Args>(args)...)));
    }

    void need(uint64_t n, const char* what) const {
        if (n > left())
            fail_at(pos_, "truncated {} (expected {} bytes, found {} before end of file)", what,
                    n, left());
    }

    template <class T>
    T pod(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, b_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    std::string str(const char* what, uint64_t max_len = std::numeric_limits<uint64_t>::max()) {
        const uint64_t at = pos_;
        const auto n = pod<uint64_t>(what);
        if (n > left())
            fail_at(at, "{} length overflows the file (expected at most {} bytes, found {})",
                    what, left(), n);
        if (n > max_len)
            fail_at(at, "{} too long (expected at most {} bytes, found {})", what, max_len, n);
        std::string s(reinterpret_cast<const char*>(b_.data() + pos_), size_t(n));
        pos_ += n;
        return s;
    }

    Value::Scalar scalar(ValueType t) {
        switch (t) {
            case ValueType::UINT8: return pod<uint8_t>("u8 value");
            case ValueType::INT8: return pod<int8_t>("i8 value");
            case ValueType::UINT16: return pod<uint16_t>("u16 value");
            case ValueType::INT16: return pod<int16_t>("i16 value");
            case ValueType::UINT32: return pod<uint32_t>("u32 value");
            case ValueType::INT32: return pod<int32_t>("i32 value");
            case ValueType::FLOAT32: return pod<float>("f32 value");
            case ValueType::BOOL: {
                const uint64_t at = pos_;
                const auto b = pod<uint8_t>("bool value");
                if (b > 1) fail_at(at, "invalid bool (expected 0 or 1, found {})", b);
                return b == 1;
            }
            case ValueType::STRING: return str("string");
            case ValueType::UINT64: return pod<uint64_t>("u64 value");
            case ValueType::INT64: return pod<int64_t>("i64 value");
            case ValueType::FLOAT64: return pod<double>("f64 value");
            case ValueType::ARRAY: break;
        }
        fail_at(pos_, "internal: scalar read of type {}", uint32_t(t));
    }

    ValueType value_type(const char* what) {
        const uint64_t at = pos_;
        const auto t = pod<uint32_t>(what);
        if (t > uint32_t(ValueType::FLOAT64))
            fail_at(at, "unknown {} (expected 0..12, found {})", what, t);
        return ValueType(t);
    }

    Value value(const std::string& key) {
        const ValueType t = value_type("value type");
        if (t != ValueType::ARRAY) {
            Value v;
            v.type = t;
            v.scalar = scalar(t);
            return v;
        }
        const uint64_t type_at = pos_;
        const ValueType et = value_type("array element type");
        if (et == ValueType::ARRAY)
            fail_at(type_at, "nested array in key '{}' (expected a scalar element type, found "
                    "array)", shown(key));
        const uint64_t count_at = pos_;
        const auto n = pod<uint64_t>("array length");
        if (n > kMaxArrayElements - array_elements_)
            fail_at(count_at, "array length of key '{}' exceeds the metadata budget (expected "
                    "at most {} array elements in the file, found {} more after {})", shown(key),
                    kMaxArrayElements, n, array_elements_);
        // Each element takes at least its fixed size (or a string's 8-byte length), so a
        // count the remaining bytes cannot hold is rejected before reserving memory.
        const uint64_t min_elem = et == ValueType::STRING ? 8 : fixed_size(et);
        if (n > left() / min_elem)
            fail_at(count_at, "array length of key '{}' overflows the file (expected at most "
                    "{} elements of {}, found {})", shown(key), left() / min_elem,
                    value_type_name(et), n);
        array_elements_ += n;
        Value v;
        v.type = ValueType::ARRAY;
        v.elem_type = et;
        v.elems.reserve(size_t(n));  // bounded by the file size and the budget above
        for (uint64_t i = 0; i < n; ++i) v.elems.push_back(scalar(et));
        return v;
    }

private:
    std::span<const uint8_t> b_;
    const std::string& name_;
    uint64_t pos_ = 0;
    uint64_t array_elements_ = 0;
};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

std::string TensorInfo::shape_string() const {
    std::string s = "[";
    for (uint32_t i = 0; i < n_dims; ++i) s += fmt::format("{}{}", i ? ", " : "", ne[i]);
    return s + "]";
}

namespace {

// A read-only mapping of the file at a 2 MiB-aligned address, advised for transparent huge
// pages before anything touches it. On kernels whose page cache takes large folios (ext4 and
// XFS on Linux 6.x), the faults then read the file in 2 MiB folios and map each with one TLB
// entry, as --no-mmap's anonymous copy is, without the copy or its second 80 GB. File pages
// already cached in small folios stay small (measured on the 4-layer Flash file: 9.3 of 9.3 GB
// PMD-mapped from a cold cache, 1.2 GB from a cache filled by plain reads).
void* map_huge_aligned(int fd, size_t size) {
    constexpr size_t kHuge = size_t(2) << 20;
    void* m = MAP_FAILED;
    void* res = mmap(nullptr, size + kHuge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (res != MAP_FAILED) {
        const uintptr_t base = uintptr_t(res), aligned = (base + kHuge - 1) & ~uintptr_t(kHuge - 1);
        m = mmap(reinterpret_cast<void*>(aligned), size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
        if (m == MAP_FAILED) {
            const int e = errno;
            munmap(res, size + kHuge);
            errno = e;
            return m;
        }
        // Give back the reservation around the file's pages.
        const size_t page = size_t(sysconf(_SC_PAGESIZE));
        const uintptr_t end = aligned + (size + page - 1) / page * page, res_end = base + size + kHuge;
        if (aligned > base) munmap(res, aligned - base);
        if (res_end > end) munmap(reinterpret_cast<void*>(end), res_end - end);
    } else {
        m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    }
#ifdef MADV_HUGEPAGE
    if (m != MAP_FAILED) madvise(m, size, MADV_HUGEPAGE);  // advice only: fine if THP is off
#endif
    return m;
}

// Reads the byte ranges [offset, offset + length) of fd into the same offsets of dst, in
// slices of at most 2 MiB over several threads: the copy's time goes to faulting in and
// clearing fresh huge pages (9.4 GB in 7.5 s on one thread of this VM), which the threads do
// in parallel. Returns the offset of the first failed read and its errno (0 when all went
// well; a file shorter than a range reads as EIO).
std::pair<size_t, int> read_in_parallel(int fd, uint8_t* dst,
                                        const std::vector<std::pair<size_t, size_t>>& ranges) {
    constexpr size_t kSlice = size_t(2) << 20;
    std::vector<std::pair<size_t, size_t>> slices;  // [begin, end)
    for (const auto& [off, len] : ranges)
        for (size_t b = off; b < off + len;) {
            const size_t e = std::min(off + len, (b / kSlice + 1) * kSlice);
            slices.emplace_back(b, e);
            b = e;
        }
    const size_t n = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
    const size_t threads = std::max<size_t>(1, std::min(n, slices.size()));
    std::vector<std::pair<size_t, int>> result(threads, {0, 0});
    auto read_range = [&](size_t k) {
        const size_t first = slices.size() * k / threads, last = slices.size() * (k + 1) / threads;
        for (size_t i = first; i < last; ++i)
            for (size_t done = slices[i].first; done < slices[i].second;) {
                const ssize_t r = ::pread(fd, dst + done, slices[i].second - done, off_t(done));
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) {
                    result[k] = {done, r < 0 ? errno : EIO};
                    return;
                }
                done += size_t(r);
            }
    };
    std::vector<std::thread> pool;
    size_t k = 1;
    try {
        for (; k < threads; ++k) pool.emplace_back(read_range, k);
    } catch (const std::system_error&) {  // no more threads: this one reads the rest
        for (; k < threads; ++k) read_range(k);
    }
    read_range(0);
    for (auto& t : pool) t.join();
    for (const auto& r : result)
        if (r.second != 0) return r;
    return {0, 0};
}

}  // namespace

namespace {

// What a non-regular file is, for the error message.
const char* file_kind(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

[[noreturn]] void not_regular(const std::string& path, mode_t m) {
    fail("{}: is {}, not a regular file (a model must be a GGUF file on disk)", path, file_kind(m));
}

}  // namespace

std::unique_ptr<File> File::open(const std::string& path, Load load, const TensorFilter& keep) {
    // The type is checked before open(), and open() does not block either: opening a FIFO for
    // reading would otherwise wait forever for a writer (and a device may act on open).
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) not_regular(path, st.st_mode);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
    if (fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        fail("{}: cannot stat: {}", path, std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {  // replaced since the stat() above
        ::close(fd);
        not_regular(path, st.st_mode);
    }
    std::unique_ptr<File> f(new File());
    f->path_ = path;
    const auto size = size_t(st.st_size);
    if (size > 0) {
        void* m = MAP_FAILED;
        int e = 0;
        if (load == Load::Copy && !keep) {
            m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            e = errno;
            if (m != MAP_FAILED) {
                madvise(m, size, MADV_HUGEPAGE);  // advice only: fine if THP is off
                const auto [at, err] = read_in_parallel(fd, static_cast<uint8_t*>(m), {{0, size}});
                if (err != 0) {
                    munmap(m, size);
                    ::close(fd);
                    fail("{}: read failed at byte {} of {}: {}", path, at, size, std::strerror(err));
                }
            }
        } else {
            m = map_huge_aligned(fd, size);
            e = errno;
        }
        if (m == MAP_FAILED) {
            ::close(fd);
            fail("{}: cannot map {} bytes: {}", path, size, std::strerror(e));
        }
        f->map_ = m;
        f->map_size_ = size;
        f->bytes_ = {static_cast<const uint8_t*>(m), size};
    }
    try {
        f->parse_all();  // on throw, ~File unmaps
        if (load == Load::Copy && keep && size > 0) f->copy_kept(fd, keep);
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
    return f;
}

std::unique_ptr<File> File::parse(std::span<const uint8_t> bytes, const std::string& name) {
    std::unique_ptr<File> f(new File());
    f->path_ = name;
    f->bytes_ = bytes;
    f->parse_all();
    return f;
}

void File::copy_kept(int fd, const TensorFilter& keep) {
    const size_t size = bytes_.size();
    void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) fail("{}: cannot reserve {} bytes: {}", path_, size, std::strerror(errno));
    madvise(m, size, MADV_HUGEPAGE);  // advice only: fine if THP is off
    std::vector<std::pair<size_t, size_t>> ranges = {{0, size_t(data_offset_)}};
    for (const TensorInfo& t : tensors_)
        if (keep(t)) ranges.emplace_back(size_t(data_offset_ + t.offset), size_t(t.n_bytes));
    const auto [at, err] = read_in_parallel(fd, static_cast<uint8_t*>(m), ranges);
    if (err != 0) {
        munmap(m, size);
        fail("{}: read failed at byte {} of {}: {}", path_, at, size, std::strerror(err));
    }
    munmap(map_, map_size_);
    map_ = m;
    map_size_ = size;
    bytes_ = {static_cast<const uint8_t*>(m), size};
    for (const TensorInfo& t : tensors_) {
        if (keep(t)) continue;
        // Never read: data() of such a tensor points at zero pages. Recorded so that tests and
        // tools can tell (holds()).
        skipped_.insert(t.name);
    }
}

File::~File() {
    if (map_) munmap(map_, map_size_);
}

namespace {

// One tensor directory entry: name, dimensions, type and byte size, each checked where it
// stands (the offset is read by the caller, which reports against its position).
TensorInfo read_tensor_info(Cursor& c, const std::map<std::string, size_t>& index) {
    TensorInfo t;
    const uint64_t name_at = c.pos();
    t.name = c.str("tensor name");
    if (index.count(t.name))
        c.fail_at(name_at, "duplicate tensor name '{}' (expected unique names, found a "
                  "second one)", shown(t.name));
    const uint64_t dims_at = c.pos();
    t.n_dims = c.pod<uint32_t>("tensor n_dims");
    if (t.n_dims < 1 || t.n_dims > kMaxDims)
        c.fail_at(dims_at, "tensor '{}' has a bad dimension count (expected 1..{}, found "
                  "{})", shown(t.name), kMaxDims, t.n_dims);
    int64_t elements = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
        const uint64_t ne_at = c.pos();
        const auto ne = c.pod<uint64_t>("tensor ne");
        if (ne > uint64_t(std::numeric_limits<int64_t>::max()))
            c.fail_at(ne_at, "tensor '{}' ne[{}] is negative (expected >= 0, found {})",
                      shown(t.name), d, int64_t(ne));
        t.ne[d] = int64_t(ne);
        if (__builtin_mul_overflow(elements, t.ne[d], &elements))
            c.fail_at(ne_at, "tensor '{}' element count overflows (expected at most {}, "
                      "found a product beyond it at ne[{}] = {})", shown(t.name),
                      std::numeric_limits<int64_t>::max(), d, ne);
    }
    const uint64_t type_at = c.pos();
    const auto type_id = c.pod<uint32_t>("tensor type");
    const auto info = tensor_type_info(type_id);
    if (!info)
        c.fail_at(type_at, "tensor '{}' has an unknown type (expected a ggml type id, found "
                  "{})", shown(t.name), type_id);
    t.type = TensorType(type_id);
    if (t.ne[0] % info->block_values != 0)
        c.fail_at(type_at, "tensor '{}' row does not fill whole {} blocks (expected ne[0] a "
                  "multiple of {}, found {})", shown(t.name), info->name,
                  info->block_values,
                  t.ne[0]);
    if (__builtin_mul_overflow(uint64_t(elements) / info->block_values, info->block_bytes,
                               &t.n_bytes))
        c.fail_at(type_at, "tensor '{}' byte size overflows (expected at most 2^64-1, found "
                  "{} blocks of {} bytes)", shown(t.name),
                  uint64_t(elements) / info->block_values,
                  info->block_bytes);
    return t;
}

}  // namespace

void File::parse_all() {
    Cursor c(bytes_, path_);

    const auto magic = c.pod<uint32_t>("magic");
    if (magic != kMagic)
        c.fail_at(0, "bad magic (expected 0x{:08x} \"GGUF\", found 0x{:08x})", kMagic, magic);
    version_ = c.pod<uint32_t>("version");
    if (version_ != 2 && version_ != 3) {
        if (__builtin_bswap32(version_) == 2 || __builtin_bswap32(version_) == 3)
            c.fail_at(4, "big-endian GGUF is not supported (expected version 2 or 3, found {} "
                      "byte-swapped)", __builtin_bswap32(version_));
        c.fail_at(4, "unsupported GGUF version (expected 2 or 3, found {})", version_);
    }
    const uint64_t n_tensors_at = c.pos();
    const auto n_tensors = c.pod<uint64_t>("tensor count");
    const uint64_t n_kv_at = c.pos();
    const auto n_kv = c.pod<uint64_t>("metadata count");
    if (n_kv > c.left() / kMinKvBytes)
        c.fail_at(n_kv_at, "metadata count overflows the file (expected at most {}, found {})",
                  c.left() / kMinKvBytes, n_kv);
    if (n_tensors > c.left() / kMinTensorInfoBytes ||
        n_tensors * kMinTensorInfoBytes > c.left() - n_kv * kMinKvBytes)
        c.fail_at(n_tensors_at, "tensor count overflows the file (expected at most {}, found "
                  "{})", (c.left() - n_kv * kMinKvBytes) / kMinTensorInfoBytes, n_tensors);

    // Metadata. Nothing is reserved from the counts: a bogus count fails at the first
    // missing entry instead of allocating up front.
    for (uint64_t i = 0; i < n_kv; ++i) {
        const uint64_t key_at = c.pos();
        std::string key = c.str("key", kMaxKeyBytes);
        if (key.empty())
            c.fail_at(key_at, "empty key (expected 1..{} bytes, found 0)", kMaxKeyBytes);
        if (kv_index_.count(key))
            c.fail_at(key_at, "duplicate key '{}' (expected unique keys, found a second one)",
                      shown(key));
        const uint64_t value_at = c.pos();
        Value v = c.value(key);
        if (key == "general.alignment") {
            if (v.type != ValueType::UINT32)
                c.fail_at(value_at, "general.alignment has the wrong type (expected u32, found "
                          "{})", value_type_name(v.type));
            const uint32_t a = std::get<uint32_t>(v.scalar);
            if (a == 0 || !std::has_single_bit(a))
                c.fail_at(value_at, "general.alignment is not a power of two (expected 1, 2, "
                          "4, ..., found {})", a);
            alignment_ = a;
        }
        kv_index_.emplace(key, kv_.size());
        kv_.emplace_back(std::move(key), std::move(v));
    }

    // Tensor directory.
    std::vector<uint64_t> offset_at;  // where each tensor's offset field is, for messages
    for (uint64_t i = 0; i < n_tensors; ++i) {
        TensorInfo t = read_tensor_info(c, tensor_index_);
        offset_at.push_back(c.pos());
        t.offset = c.pod<uint64_t>("tensor offset");
        if (t.offset % alignment_ != 0)
            c.fail_at(offset_at.back(), "tensor '{}' offset is misaligned (expected a multiple of "
                      "{}, found {})", shown(t.name), alignment_, t.offset);
        tensor_index_.emplace(t.name, tensors_.size());
        tensors_.push_back(std::move(t));
    }

    // Data section: starts at the next alignment boundary after the directory. A file with
    // no tensors may end before it.
    data_offset_ = align_up(c.pos(), alignment_);
    if (tensors_.empty()) return;
    if (data_offset_ > bytes_.size())
        c.fail_at(c.pos(), "data section starts beyond end of file (expected at most {} bytes "
                  "of padding, found {})", bytes_.size() - c.pos(), data_offset_ - c.pos());
    const uint64_t data_size = bytes_.size() - data_offset_;
    for (size_t i = 0; i < tensors_.size(); ++i) {
        const TensorInfo& t = tensors_[i];
        if (t.offset > data_size || t.n_bytes > data_size - t.offset)
            c.fail_at(offset_at[i], "tensor '{}' data is out of range (expected to end within "
                      "the {} data bytes, found offset {} + {} bytes)", shown(t.name), data_size,
                      t.offset, t.n_bytes);
    }
    // Overlap: sorted by offset, every tensor must start at or after the previous end.
    std::vector<size_t> order(tensors_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return tensors_[a].offset != tensors_[b].offset ? tensors_[a].offset < tensors_[b].offset
                                                        : a < b;  // the later one is reported
    });
    const TensorInfo* prev = nullptr;
    for (size_t i : order) {
        const TensorInfo& t = tensors_[i];
        if (t.n_bytes == 0) continue;
        if (prev && t.offset < prev->offset + prev->n_bytes)
            c.fail_at(offset_at[i], "tensor '{}' overlaps tensor '{}' (expected offset >= {}, "
                      "found {})", shown(t.name), shown(prev->name),
                      prev->offset + prev->n_bytes, t.offset);
        prev = &t;
    }
}

const Value* File::find(const std::string& key) const {
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {

const Value& need_key(const File& f, const std::string& key) {
    const Value* v = f.find(key);
    if (!v) fail("{}: metadata key '{}' missing", f.path(), key);
    return *v;
}

[[noreturn]] void wrong_type(const File& f, const std::string& key, const Value& v,
                             const char* expected) {
    std::string found = value_type_name(v.type);
    if (v.is_array()) found += fmt::format(" of {}", value_type_name(v.elem_type));
    fail("{}: metadata key '{}' has type {}, expected {}", f.path(), key, found, expected);
}

}  // namespace

uint32_t File::get_u32(const std::string& key) const {
    const Value& v = need_key(*this, key);
    const auto u = v.as_uint();
    if (!u) wrong_type(*this, key, v, "an unsigned integer");
    if (*u > std::numeric_limits<uint32_t>::max())
        fail("{}: metadata key '{}' = {} does not fit u32", path_, key, *u);
    return uint32_t(*u);
}

uint64_t File::get_u64(const std::string& key) const {
    const Value& v = need_key(*this, key);
    const auto u = v.as_uint();
    if (!u) wrong_type(*this, key, v, "an unsigned integer");
    return *u;
}

float File::get_f32(const std::string& key) const {
    const Value& v = need_key(*this, key);
    const auto d = v.as_double();
    if (!d) wrong_type(*this, key, v, "a number");
    return float(*d);
}

bool File::get_bool(const std::string& key) const {
    const Value& v = need_key(*this, key);
    if (v.type != ValueType::BOOL) wrong_type(*this, key, v, "bool");
    return std::get<bool>(v.scalar);
}

std::string File::get_string(const std::string& key) const {
    const Value& v = need_key(*this, key);
    const std::string* s = v.as_string();
    if (!s) wrong_type(*this, key, v, "string");
    return *s;
}

const TensorInfo* File::find_tensor(const std::string& name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& File::tensor(const std::string& name) const {
    const TensorInfo* t = find_tensor(name);
    if (!t) fail("{}: tensor '{}' missing", path_, name);
    return *t;
}

}  // namespace ds4::gguf
