// GGUF v2/v3 reader over a read-only mmap.
//
// Opening validates the whole header before anything is returned: magic, version, counts,
// every key and string length, value types, tensor dims (no overflow of element or byte
// counts), types, general.alignment (a power of two), offsets aligned and inside the file,
// tensors not overlapping. Every failure throws ds4::Error naming the file, the byte offset
// and what was expected vs found; nothing aborts on a hostile file.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <set>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "gguf/value.h"

namespace ds4::gguf {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kDefaultAlignment = 32;

struct TensorInfo {
    std::string name;
    TensorType type = TensorType::F32;
    uint32_t n_dims = 0;
    std::array<int64_t, 4> ne{1, 1, 1, 1};  // ne[0] is the contiguous dimension
    uint64_t offset = 0;  // from the start of the data section (as stored in the file)
    uint64_t n_bytes = 0;  // bytes of data, from ne and the type's block geometry

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    std::string shape_string() const;  // "[4096, 1024]"
};

class File {
public:
    // How the bytes are held: a read-only file mapping (fast start, pages shared with the page
    // cache; 2 MiB-aligned and advised for huge pages, which it gets for the file pages it
    // reads in itself), or a private copy read into anonymous memory with transparent huge
    // pages (slower start, twice the memory while the page cache still holds the file; huge
    // pages whatever the cache holds). With 4 KiB pages every token's pass over the weights
    // misses the TLB: decode measured ~3x slower on a VM. On this project's VM the copy also
    // decodes 1.10-1.18x faster than a mapping on 2 MiB pages (docs/PERFORMANCE.md, "Weights
    // in memory"); it is read over several threads.
    enum class Load { Map, Copy };
    // The tools' --no-mmap help (Load::Copy), one text for all of them.
    static constexpr const char* kCopyHelp =
        "Read the weights into huge-page memory instead of mapping the file: the file is held "
        "twice while it stays cached; faster decode on VMs (1.1x here) and when the cached file "
        "sits on small pages (docs/PERFORMANCE.md)";
    // Which tensors a Copy load reads (the others' pages stay untouched: a process that runs a
    // range of layers holds only its share of the file). Empty: all of them.
    using TensorFilter = std::function<bool(const TensorInfo&)>;
    // Maps (or copies) and validates `path`. Throws ds4::Error on any problem. Only regular
    // files are read: a directory, FIFO, socket or device is refused by its type, without
    // blocking (a FIFO is never waited on for a writer).
    static std::unique_ptr<File> open(const std::string& path, Load load = Load::Map,
                                      const TensorFilter& keep = {});
    // Parses an in-memory image (the fuzz target and tests); `name` appears in messages.
    // The bytes must outlive the File.
    static std::unique_ptr<File> parse(std::span<const uint8_t> bytes, const std::string& name);
    ~File();
    File(const File&) = delete;
    File& operator=(const File&) = delete;

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // absolute start of tensor data
    uint64_t file_size() const { return bytes_.size(); }

    // Metadata in file order; lookups by key.
    const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
    const Value* find(const std::string& key) const;
    // Typed getters: throw ds4::Error "<file>: metadata key 'K' missing" or "... has type X,
    // expected Y" when absent or of the wrong kind. The integer getters accept any integer
    // type whose value fits; get_f32 accepts any numeric type.
    uint32_t get_u32(const std::string& key) const;
    uint64_t get_u64(const std::string& key) const;
    float get_f32(const std::string& key) const;
    bool get_bool(const std::string& key) const;
    std::string get_string(const std::string& key) const;

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find_tensor(const std::string& name) const;  // nullptr when absent
    const TensorInfo& tensor(const std::string& name) const;      // throws when absent
    // Pointer to the tensor's first byte inside the mapping (valid for the File's lifetime).
    const uint8_t* data(const TensorInfo& t) const { return bytes_.data() + data_offset_ + t.offset; }
    // Whether the tensor's bytes are here (false only for tensors a Copy load's filter left out).
    bool holds(const TensorInfo& t) const { return !skipped_.count(t.name); }

private:
    File() = default;
    void parse_all();
    void copy_kept(int fd, const TensorFilter& keep);

    std::string path_;
    std::span<const uint8_t> bytes_;
    void* map_ = nullptr;
    size_t map_size_ = 0;
    uint32_t version_ = 0;
    uint64_t alignment_ = kDefaultAlignment;
    uint64_t data_offset_ = 0;
    std::vector<std::pair<std::string, Value>> kv_;
    std::map<std::string, size_t> kv_index_;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, size_t> tensor_index_;
    std::set<std::string> skipped_;
};

}  // namespace ds4::gguf
