// Streaming GGUF v3 writer: declare metadata and tensors first, then stream each tensor's
// bytes in declaration order. Only the current tensor is ever in memory, so the generator and
// the quantizer can write files far larger than RAM. Data is padded to general.alignment.
//
//   Writer w(path);
//   w.set("general.architecture", Value::str("deepseek4"));
//   w.add_tensor("token_embd.weight", TensorType::F16, {4096, 129280});
//   w.begin_data();                       // writes header + tensor directory
//   w.write_tensor("token_embd.weight", bytes);   // or skip_tensor(...) for a sparse hole
//   w.finish();                           // pads, truncates, fsyncs, renames into place
//
// The file is written under a random temporary name next to `path` and renamed over it by
// finish() (common/file_io.h: AtomicFile): an existing file is replaced only by a complete one,
// and a symlink planted at a predictable name is never followed.
//
// Errors (I/O, wrong order, wrong byte count, duplicate names) throw ds4::Error.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "gguf/reader.h"
#include "gguf/tensor_type.h"
#include "gguf/value.h"

namespace ds4::gguf {

class Writer {
public:
    explicit Writer(std::string path, uint64_t alignment = kDefaultAlignment);
    ~Writer();  // an unfinished file is removed, so a failed run leaves no half-written model
                // (and an older file at `path` stays as it was)
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    // Sets (or replaces) a metadata key. general.alignment is written from the constructor's
    // alignment and may not be set here.
    void set(const std::string& key, Value v);
    // Declares a tensor; ne[0] is the contiguous dimension. Returns its byte size.
    uint64_t add_tensor(const std::string& name, TensorType type, std::vector<int64_t> ne);

    void begin_data();
    // Bytes of the next declared tensor (must be that tensor's name and exact size).
    void write_tensor(const std::string& name, std::span<const uint8_t> bytes);
    // Leaves the next tensor's bytes as a hole (sparse file; reads as zeros).
    void skip_tensor(const std::string& name);
    // Writes `bytes` at byte `offset` of the next tensor and leaves the rest of it a hole.
    void write_tensor_part(const std::string& name, uint64_t offset, std::span<const uint8_t> bytes);
    void finish();

private:
    struct Pending {
        std::string name;
        TensorType type;
        std::vector<int64_t> ne;
        uint64_t offset, n_bytes;
    };
    void write_bytes(const void* p, size_t n);
    void pad_to(uint64_t absolute);

    std::string path_;
    uint64_t alignment_;
    std::vector<std::pair<std::string, Value>> kv_;
    std::vector<Pending> tensors_;
    uint64_t data_bytes_ = 0;
    size_t next_ = 0;
    uint64_t pos_ = 0;
    uint64_t data_start_ = 0;
    std::unique_ptr<AtomicFile> out_;  // from begin_data() until finish()
    bool started_ = false, finished_ = false;
};

}  // namespace ds4::gguf
