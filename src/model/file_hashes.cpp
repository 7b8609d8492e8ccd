#include "model/file_hashes.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <variant>

#include "common/error.h"

namespace ds4::model {
namespace {

std::array<uint8_t, 16> digest(XXH3_state_t* st) {
    const XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    std::array<uint8_t, 16> out;
    std::memcpy(out.data(), c.digest, 16);
    return out;
}

struct Hasher {
    XXH3_state_t* st = XXH3_createState();
    Hasher() { XXH3_128bits_reset(st); }
    ~Hasher() { XXH3_freeState(st); }
    void bytes(const void* p, size_t n) { XXH3_128bits_update(st, p, n); }
    void str(const std::string& s) {
        const uint64_t n = s.size();
        bytes(&n, sizeof n);
        bytes(s.data(), s.size());
    }
    template <class T>
    void pod(T v) { bytes(&v, sizeof v); }
    void scalar(const gguf::Value::Scalar& v) {
        pod(uint32_t(v.index()));
        std::visit([&](const auto& x) {
            if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string>) str(x);
            else pod(x);
        }, v);
    }
    std::array<uint8_t, 16> done() { return digest(st); }
};

// Bytes [at, at + n) of a file the load did not keep in memory.
void read_exact(const std::string& path, uint64_t at, uint8_t* dst, size_t n) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
    size_t done = 0;
    while (done < n) {
        const ssize_t r = ::pread(fd, dst + done, n - done, off_t(at + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            const int e = r < 0 ? errno : 0;
            ::close(fd);
            fail("{}: read of {} bytes at byte {} failed: {}", path, n, at + done,
                 e ? std::strerror(e) : "unexpected end of file");
        }
        done += size_t(r);
    }
    ::close(fd);
}

}  // namespace

std::array<uint8_t, 16> metadata_hash(const gguf::File& f) {
    Hasher h;
    for (const auto& [k, v] : f.metadata()) {
        if (k.rfind("general.", 0) == 0 && k != "general.architecture") continue;
        if (k == kSplitLayersKey) continue;
        h.str(k);
        h.pod(uint32_t(v.type));
        if (v.is_array()) {
            h.pod(uint32_t(v.elem_type));
            h.pod(uint64_t(v.elems.size()));
            for (const auto& e : v.elems) h.scalar(e);
        } else {
            h.scalar(v.scalar);
        }
    }
    return h.done();
}

namespace {

// Name, type, shape and a sample of the bytes (64 at each end): tells apart files of one layout
// whose weights differ, e.g. two generator seeds or an imatrix and a plain quantization.
void hash_tensor(Hasher& h, const gguf::File& f, const std::string& path, const gguf::TensorInfo& t) {
    h.str(t.name);
    h.pod(uint32_t(t.type));
    for (uint32_t d = 0; d < t.n_dims; ++d) h.pod(t.ne[d]);
    const size_t k = std::min<size_t>(64, t.n_bytes);
    if (f.holds(t)) {
        h.bytes(f.data(t), k);
        h.bytes(f.data(t) + t.n_bytes - k, k);
    } else {  // a streamed expert tensor (or one outside the range): the same bytes, from the disk
        uint8_t ends[128];
        const uint64_t at = f.data_offset() + t.offset;
        read_exact(path, at, ends, k);
        read_exact(path, at + t.n_bytes - k, ends + k, k);
        h.bytes(ends, k);
        h.bytes(ends + k, k);
    }
}

}  // namespace

std::array<uint8_t, 16> layer_hash(const gguf::File& f, const std::string& path, uint32_t il) {
    Hasher h;
    const std::string prefix = fmt::format("blk.{}.", il);
    for (const gguf::TensorInfo& t : f.tensors())
        if (t.name.rfind(prefix, 0) == 0) hash_tensor(h, f, path, t);
    return h.done();
}

std::array<uint8_t, 16> weights_hash(const gguf::File& f) {
    Hasher h;
    for (const gguf::TensorInfo& t : f.tensors()) hash_tensor(h, f, f.path(), t);
    return h.done();
}

bool tensor_in_range(const std::string& name, const LayerRange& r) {
    unsigned layer = 0;
    if (std::sscanf(name.c_str(), "blk.%u.", &layer) == 1) return r.contains(layer);
    if (name.rfind("token_embd.", 0) == 0) return r.embedding();
    if (name.rfind("output", 0) == 0) return r.output;
    return true;
}

bool is_routed_expert(const std::string& name) {
    return name.ends_with("ffn_gate_exps.weight") || name.ends_with("ffn_up_exps.weight") ||
           name.ends_with("ffn_down_exps.weight");
}

ExpertFileLayout expert_file_layout(const gguf::File& f, int64_t n_expert, int64_t n_used,
                                    std::span<const LayerExperts> layers, std::span<const uint8_t> held) {
    ExpertFileLayout out;
    out.path = f.path();
    out.file_size = f.file_size();
    out.n_expert = n_expert;
    out.n_expert_used = n_used;
    out.layers.resize(layers.size());
    for (size_t il = 0; il < layers.size(); ++il) {
        if (!held[il]) continue;
        ExpertFileLayout::Layer& L = out.layers[il];
        L.held = true;
        const char* names[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
        const ExpertMatrix* mats[3] = {&layers[il].gate, &layers[il].up, &layers[il].down};
        for (int k = 0; k < 3; ++k) {
            const gguf::TensorInfo& t = f.tensor(fmt::format("blk.{}.{}", il, names[k]));
            ExpertTensorFile& p = L.parts[size_t(k)];
            p.type = t.type;
            p.rows_per_expert = mats[k]->rows_per_expert;
            p.cols = mats[k]->all.cols;
            p.row_bytes = mats[k]->all.row_bytes;
            p.offset = f.data_offset() + t.offset;
            p.expert_bytes = uint64_t(p.rows_per_expert) * p.row_bytes;
            if (p.expert_bytes * uint64_t(n_expert) != t.n_bytes)
                fail("{}: tensor {} holds {} bytes, not {} experts of {}", out.path, t.name, t.n_bytes, n_expert,
                     p.expert_bytes);
        }
    }
    return out;
}

void NoExperts::prepare(uint32_t layer, std::span<const int32_t>, std::span<const int32_t>) {
    fail("layer {}: the model was opened for SSD streaming but no expert source is set", layer);
}

ExpertWeights NoExperts::expert(uint32_t layer, int32_t e) const {
    fail("layer {} expert {}: no expert source is set", layer, e);
}

}  // namespace ds4::model
