#include "gguf/writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include "common/error.h"

namespace ds4::gguf {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF is written little-endian");

constexpr uint32_t kVersion = 3;

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Serializes the header into memory: it is small next to the data (the largest, a 129k-token
// vocabulary, is a few MB), and knowing its exact size up front fixes the data offset.
class HeaderBuf {
public:
    template <class T>
    void pod(T v) {
        static_assert(std::is_trivially_copyable_v<T>);
        raw(&v, sizeof(T));
    }
    void str(const std::string& s) {
        pod<uint64_t>(s.size());
        raw(s.data(), s.size());
    }
    // resize + memcpy rather than vector::insert, which trips a g++ 12 -Wstringop-overflow
    // false positive.
    void raw(const void* p, size_t n) {
        const size_t at = bytes.size();
        bytes.resize(at + n);
        if (n) std::memcpy(bytes.data() + at, p, n);
    }
    void scalar(const Value::Scalar& s) {
        std::visit(
            [this](const auto& x) {
                using T = std::decay_t<decltype(x)>;
                if constexpr (std::is_same_v<T, std::string>)
                    str(x);
                else if constexpr (std::is_same_v<T, bool>)
                    pod<uint8_t>(x ? 1 : 0);
                else
                    pod<T>(x);
            },
            s);
    }
    void value(const Value& v) {
        pod<uint32_t>(uint32_t(v.type));
        if (!v.is_array()) {
            scalar(v.scalar);
            return;
        }
        pod<uint32_t>(uint32_t(v.elem_type));
        pod<uint64_t>(v.elems.size());
        for (const auto& e : v.elems) scalar(e);
    }
    std::vector<uint8_t> bytes;
};

// The variant alternative each GGUF scalar type must hold (see value.cpp).
size_t alternative_of(ValueType t) {
    const auto n = static_cast<size_t>(t);
    return n < 9 ? n : n - 1;
}

}  // namespace

Writer::Writer(std::string path, uint64_t alignment)
    : path_(std::move(path)), alignment_(alignment) {
    if (alignment_ == 0 || !std::has_single_bit(alignment_) || alignment_ > UINT32_MAX)
        fail("{}: GGUF alignment must be a power of two that fits u32 (found {})", path_,
             alignment_);
}

Writer::~Writer() = default;  // an uncommitted AtomicFile removes its temporary

void Writer::set(const std::string& key, Value v) {
    if (started_) fail("{}: metadata key '{}' set after begin_data()", path_, key);
    if (key.empty()) fail("{}: empty metadata key", path_);
    if (key == "general.alignment")
        fail("{}: general.alignment comes from the Writer's alignment argument", path_);
    // Values built by hand (not through the constructors) must still be well-formed, or the
    // file would not read back.
    const auto type_id = uint32_t(v.type);
    if (type_id > 12) fail("{}: key '{}' has unknown value type {}", path_, key, type_id);
    if (v.is_array()) {
        if (v.elem_type == ValueType::ARRAY || uint32_t(v.elem_type) > 12)
            fail("{}: key '{}' is an array of {}, which GGUF cannot store", path_, key,
                 uint32_t(v.elem_type));
        for (const auto& e : v.elems)
            if (e.index() != alternative_of(v.elem_type))
                fail("{}: key '{}': array element does not hold a {}", path_, key,
                     value_type_name(v.elem_type));
    } else if (v.scalar.index() != alternative_of(v.type)) {
        fail("{}: key '{}': value does not hold a {}", path_, key, value_type_name(v.type));
    }
    for (auto& kv : kv_)
        if (kv.first == key) {
            kv.second = std::move(v);
            return;
        }
    kv_.emplace_back(key, std::move(v));
}

uint64_t Writer::add_tensor(const std::string& name, TensorType type, std::vector<int64_t> ne) {
    if (started_) fail("{}: tensor '{}' added after begin_data()", path_, name);
    for (const auto& t : tensors_)
        if (t.name == name) fail("{}: duplicate tensor name '{}'", path_, name);
    const auto info = tensor_type_info(type);
    if (!info) fail("{}: tensor '{}' has unknown type {}", path_, name, uint32_t(type));
    if (ne.empty() || ne.size() > 4)
        fail("{}: tensor '{}' has {} dimensions (expected 1..4)", path_, name, ne.size());
    uint64_t n_bytes = 0;
    int64_t elements = 1;
    for (size_t i = 0; i < ne.size(); ++i) {
        if (ne[i] < 0) fail("{}: tensor '{}' has ne[{}] = {} < 0", path_, name, i, ne[i]);
        if (__builtin_mul_overflow(elements, ne[i], &elements))
            fail("{}: tensor '{}' element count overflows", path_, name);
    }
    if (ne[0] % info->block_values != 0)
        fail("{}: tensor '{}' ne[0] = {} is not a multiple of the {} block size {}", path_, name,
             ne[0], info->name, info->block_values);
    if (__builtin_mul_overflow(uint64_t(elements / info->block_values), info->block_bytes,
                               &n_bytes))
        fail("{}: tensor '{}' byte size overflows", path_, name);
    const uint64_t offset = align_up(data_bytes_, alignment_);
    if (offset < data_bytes_ || __builtin_add_overflow(offset, n_bytes, &data_bytes_))
        fail("{}: data section size overflows at tensor '{}'", path_, name);
    tensors_.push_back(Pending{name, type, std::move(ne), offset, n_bytes});
    return n_bytes;
}

void Writer::write_bytes(const void* p, size_t n) {
    out_->write(p, n);
    pos_ += n;
}

void Writer::pad_to(uint64_t absolute) {
    static const uint8_t zeros[4096] = {};
    while (pos_ < absolute) write_bytes(zeros, size_t(std::min<uint64_t>(absolute - pos_, sizeof zeros)));
}

void Writer::begin_data() {
    if (started_) fail("{}: begin_data() called twice", path_);
    HeaderBuf h;
    h.pod<uint32_t>(kMagic);
    h.pod<uint32_t>(kVersion);
    h.pod<uint64_t>(tensors_.size());
    const bool write_alignment = alignment_ != kDefaultAlignment;
    h.pod<uint64_t>(kv_.size() + (write_alignment ? 1 : 0));
    for (const auto& [key, v] : kv_) {
        h.str(key);
        h.value(v);
    }
    if (write_alignment) {
        h.str("general.alignment");
        h.value(Value::u32(uint32_t(alignment_)));
    }
    for (const auto& t : tensors_) {
        h.str(t.name);
        h.pod<uint32_t>(uint32_t(t.ne.size()));
        for (int64_t n : t.ne) h.pod<uint64_t>(uint64_t(n));
        h.pod<uint32_t>(uint32_t(t.type));
        h.pod<uint64_t>(t.offset);
    }
    data_start_ = align_up(h.bytes.size(), alignment_);

    out_ = std::make_unique<AtomicFile>(path_);
    started_ = true;
    write_bytes(h.bytes.data(), h.bytes.size());
    pad_to(data_start_);
}

void Writer::write_tensor(const std::string& name, std::span<const uint8_t> bytes) {
    if (!started_ || finished_)
        fail("{}: write_tensor('{}') outside begin_data()/finish()", path_, name);
    if (next_ >= tensors_.size())
        fail("{}: write_tensor('{}'): all declared tensors are already written", path_, name);
    const Pending& t = tensors_[next_];
    if (t.name != name)
        fail("{}: tensors must be written in declaration order (expected '{}', found '{}')",
             path_, t.name, name);
    if (bytes.size() != t.n_bytes)
        fail("{}: tensor '{}' needs {} bytes, found {}", path_, name, t.n_bytes, bytes.size());
    pad_to(data_start_ + t.offset);
    write_bytes(bytes.data(), bytes.size());
    ++next_;
}

void Writer::skip_tensor(const std::string& name) {
    if (!started_ || finished_)
        fail("{}: skip_tensor('{}') outside begin_data()/finish()", path_, name);
    if (next_ >= tensors_.size())
        fail("{}: skip_tensor('{}'): all declared tensors are already written", path_, name);
    const Pending& t = tensors_[next_];
    if (t.name != name)
        fail("{}: tensors must be written in declaration order (expected '{}', found '{}')",
             path_, t.name, name);
    // Seeking past the end leaves a hole; finish() extends the file over trailing holes.
    const uint64_t end = data_start_ + t.offset + t.n_bytes;
    if (end > uint64_t(INT64_MAX) || lseek(out_->fd(), off_t(end), SEEK_SET) < 0)
        fail("{}: seek to byte {} failed: {}", path_, end, std::strerror(errno));
    pos_ = end;
    ++next_;
}

void Writer::write_tensor_part(const std::string& name, uint64_t offset, std::span<const uint8_t> bytes) {
    if (!started_ || finished_ || next_ >= tensors_.size() || tensors_[next_].name != name)
        fail("{}: write_tensor_part('{}') is not the next tensor's", path_, name);
    const Pending& t = tensors_[next_];
    if (offset > t.n_bytes || bytes.size() > t.n_bytes - offset)
        fail("{}: tensor '{}' of {} bytes has no {} bytes at offset {}", path_, name, t.n_bytes, bytes.size(),
             offset);
    pad_to(data_start_ + t.offset);
    const uint64_t at = data_start_ + t.offset + offset;
    if (at > uint64_t(INT64_MAX) || lseek(out_->fd(), off_t(at), SEEK_SET) < 0)
        fail("{}: seek to byte {} failed: {}", path_, at, std::strerror(errno));
    pos_ = at;
    write_bytes(bytes.data(), bytes.size());
    skip_tensor(name);  // the rest: a hole up to the tensor's end
}

void Writer::finish() {
    if (!started_) fail("{}: finish() before begin_data()", path_);
    if (finished_) fail("{}: finish() called twice", path_);
    if (next_ != tensors_.size())
        fail("{}: finish() with {} of {} tensors written (next is '{}')", path_, next_,
             tensors_.size(), tensors_[next_].name);
    // The file ends padded to the alignment, as ggml writes it; ftruncate also materializes
    // a trailing hole left by skip_tensor().
    const uint64_t end = data_start_ + align_up(data_bytes_, alignment_);
    if (ftruncate(out_->fd(), off_t(end)) != 0)
        fail("{}: cannot size the file to {} bytes: {}", path_, end, std::strerror(errno));
    out_->commit();  // fsync, close, rename over path_
    out_.reset();
    finished_ = true;
}

}  // namespace ds4::gguf
