#include "quantize/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/error.h"
#include "common/half.h"
#include "quant/blocks.h"

namespace ds4::quantize {

struct SafetensorsDir::Shard {
    std::string path;
    const uint8_t* map = nullptr;
    size_t size = 0;
    uint64_t data_base = 0;
    ~Shard() {
        if (map) munmap(const_cast<uint8_t*>(map), size);
    }
};

namespace {

size_t dtype_size(const std::string& d) {
    if (d == "F32" || d == "I32") return 4;
    if (d == "F16" || d == "BF16") return 2;
    if (d == "F8_E4M3" || d == "F8_E8M0" || d == "I8" || d == "U8") return 1;
    if (d == "I64") return 8;
    return 0;
}

// E8M0: 2^(e - 127); e = 0 is read as 2^-127 (the release never uses it).
float e8m0(uint8_t e) { return std::bit_cast<float>(e == 0 ? 0x00400000u : uint32_t(e) << 23); }

// E4M3 (fn: no infinities, 0x7f / 0xff is NaN, read as 0).
float e4m3(uint8_t x) {
    const int a = x & 0x7f;
    if (a == 0 || a == 0x7f) return (x & 0x80) && a == 0 ? -0.0f : 0.0f;
    const int exp = a >> 3, man = a & 7;
    const float v = exp == 0 ? std::ldexp(float(man), -9) : std::ldexp(1.0f + float(man) / 8.0f, exp - 7);
    return x & 0x80 ? -v : v;
}

constexpr float kE2M1[16] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f, -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f};

struct ExpertName {
    int layer = -1;
    const char* w = nullptr;  // "w1" gate, "w3" up, "w2" down
};
ExpertName parse_expert(const std::string& n) {
    ExpertName e;
    for (auto [kind, w] : {std::pair{"gate", "w1"}, std::pair{"up", "w3"}, std::pair{"down", "w2"}}) {
        const std::string suffix = std::string(".ffn_") + kind + "_exps.weight";
        if (n.size() > suffix.size() + 4 && n.compare(0, 4, "blk.") == 0 &&
            n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
            e.layer = std::stoi(n.substr(4));
            e.w = w;
        }
    }
    return e;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("{}: cannot open", path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

SafetensorsDir::SafetensorsDir(SafetensorsDir&&) noexcept = default;
SafetensorsDir::~SafetensorsDir() = default;

SafetensorsDir SafetensorsDir::open(const std::string& dir) {
    namespace fs = std::filesystem;
    SafetensorsDir d;
    std::vector<std::string> files;
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    if (fs::exists(index)) {
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(read_text(index.string()));
        } catch (const nlohmann::json::exception& e) {
            fail("{}: {}", index.string(), e.what());
        }
        if (!j.contains("weight_map") || !j["weight_map"].is_object()) fail("{}: no weight_map object", index.string());
        std::set<std::string> seen;
        for (const auto& [name, file] : j["weight_map"].items())
            if (file.is_string() && seen.insert(file.get<std::string>()).second) files.push_back(file.get<std::string>());
    } else {
        for (const auto& e : fs::directory_iterator(dir))
            if (e.path().extension() == ".safetensors") files.push_back(e.path().filename().string());
        std::sort(files.begin(), files.end());
        if (files.empty()) fail("{}: neither model.safetensors.index.json nor *.safetensors", dir);
    }
    for (const std::string& file : files) {
        if (file.find("..") != std::string::npos || file.find('/') != std::string::npos)
            fail("{}: shard name '{}' leaves the directory", index.string(), file);
        auto s = std::make_unique<Shard>();
        s->path = (fs::path(dir) / file).string();
        const int fd = ::open(s->path.c_str(), O_RDONLY | O_CLOEXEC);
        struct stat st{};
        if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            if (fd >= 0) ::close(fd);
            fail("{}: cannot open safetensors shard", s->path);
        }
        s->size = size_t(st.st_size);
        void* m = s->size ? mmap(nullptr, s->size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
        ::close(fd);
        if (m == MAP_FAILED) fail("{}: cannot map ({} bytes)", s->path, s->size);
        s->map = static_cast<const uint8_t*>(m);
        uint64_t hlen = 0;
        if (s->size < 8) fail("{}: {} bytes, shorter than the header length", s->path, s->size);
        std::memcpy(&hlen, s->map, 8);
        if (hlen > s->size - 8) fail("{}: header of {} bytes in a file of {}", s->path, hlen, s->size);
        s->data_base = 8 + hlen;
        nlohmann::json h;
        try {
            h = nlohmann::json::parse(std::string_view(reinterpret_cast<const char*>(s->map + 8), size_t(hlen)));
        } catch (const nlohmann::json::exception& e) {
            fail("{}: header: {}", s->path, e.what());
        }
        for (const auto& [name, v] : h.items()) {
            if (name == "__metadata__") continue;
            Tensor t;
            t.name = name;
            try {
                t.dtype = v.at("dtype").get<std::string>();
                t.shape = v.at("shape").get<std::vector<int64_t>>();
                const auto off = v.at("data_offsets").get<std::vector<uint64_t>>();
                if (off.size() != 2) fail("data_offsets of {} values", off.size());
                t.begin = off[0], t.end = off[1];
            } catch (const nlohmann::json::exception& e) {
                fail("{}: tensor {}: {}", s->path, name, e.what());
            }
            uint64_t n = 1;
            for (int64_t x : t.shape) {
                if (x < 0) fail("{}: tensor {}: negative dimension", s->path, name);
                n *= uint64_t(x);
            }
            const size_t es = dtype_size(t.dtype);
            if (es && (t.end < t.begin || t.end - t.begin != n * es))
                fail("{}: tensor {}: {} bytes for {} values of {}", s->path, name, t.end - t.begin, n, t.dtype);
            if (t.end > s->size - s->data_base) fail("{}: tensor {} ends past the file", s->path, name);
            t.shard = d.shards_.size();
            d.tensors_[name] = std::move(t);
        }
        d.shards_.push_back(std::move(s));
    }
    return d;
}

const SafetensorsDir::Tensor* SafetensorsDir::find(const std::string& name) const {
    const auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}
const SafetensorsDir::Tensor& SafetensorsDir::tensor(const std::string& name) const {
    const Tensor* t = find(name);
    if (!t) fail("safetensors: tensor {} is in no shard", name);
    return *t;
}
std::span<const uint8_t> SafetensorsDir::bytes(const Tensor& t) const {
    const Shard& s = *shards_[t.shard];
    return {s.map + s.data_base + t.begin, size_t(t.end - t.begin)};
}
const std::string& SafetensorsDir::shard_path(const Tensor& t) const { return shards_[t.shard]->path; }

std::string SafetensorsDir::hf_name(const std::string& g) {
    static const std::map<std::string, std::string> kTop = {
        {"token_embd.weight", "embed.weight"},        {"output_norm.weight", "norm.weight"},
        {"output.weight", "head.weight"},             {"output_hc_base.weight", "hc_head_base"},
        {"output_hc_fn.weight", "hc_head_fn"},        {"output_hc_scale.weight", "hc_head_scale"}};
    static const std::map<std::string, std::string> kLayer = {
        {"hc_attn_base.weight", "hc_attn_base"}, {"hc_attn_fn.weight", "hc_attn_fn"},
        {"hc_attn_scale.weight", "hc_attn_scale"}, {"hc_ffn_base.weight", "hc_ffn_base"},
        {"hc_ffn_fn.weight", "hc_ffn_fn"}, {"hc_ffn_scale.weight", "hc_ffn_scale"},
        {"attn_sinks.weight", "attn.attn_sink"}, {"attn_q_a.weight", "attn.wq_a.weight"},
        {"attn_q_b.weight", "attn.wq_b.weight"}, {"attn_q_a_norm.weight", "attn.q_norm.weight"},
        {"attn_kv.weight", "attn.wkv.weight"}, {"attn_kv_a_norm.weight", "attn.kv_norm.weight"},
        {"attn_output_a.weight", "attn.wo_a.weight"}, {"attn_output_b.weight", "attn.wo_b.weight"},
        {"attn_compressor_ape.weight", "attn.compressor.ape"}, {"attn_compressor_kv.weight", "attn.compressor.wkv.weight"},
        {"attn_compressor_gate.weight", "attn.compressor.wgate.weight"},
        {"attn_compressor_norm.weight", "attn.compressor.norm.weight"},
        {"indexer.attn_q_b.weight", "attn.indexer.wq_b.weight"}, {"indexer.proj.weight", "attn.indexer.weights_proj.weight"},
        {"indexer_compressor_ape.weight", "attn.indexer.compressor.ape"},
        {"indexer_compressor_kv.weight", "attn.indexer.compressor.wkv.weight"},
        {"indexer_compressor_gate.weight", "attn.indexer.compressor.wgate.weight"},
        {"indexer_compressor_norm.weight", "attn.indexer.compressor.norm.weight"},
        {"attn_norm.weight", "attn_norm.weight"}, {"ffn_norm.weight", "ffn_norm.weight"},
        {"ffn_gate_shexp.weight", "ffn.shared_experts.w1.weight"}, {"ffn_up_shexp.weight", "ffn.shared_experts.w3.weight"},
        {"ffn_down_shexp.weight", "ffn.shared_experts.w2.weight"}, {"ffn_gate_inp.weight", "ffn.gate.weight"},
        {"exp_probs_b.bias", "ffn.gate.bias"}, {"ffn_gate_tid2eid.weight", "ffn.gate.tid2eid"}};
    if (const auto it = kTop.find(g); it != kTop.end()) return it->second;
    if (const ExpertName e = parse_expert(g); e.w) return fmt::format("layers.{}.ffn.experts.{}", e.layer, e.w);
    const size_t dot = g.find('.', 4);
    if (g.compare(0, 4, "blk.") == 0 && dot != std::string::npos) {
        if (const auto it = kLayer.find(g.substr(dot + 1)); it != kLayer.end())
            return fmt::format("layers.{}.{}", g.substr(4, dot - 4), it->second);
    }
    fail("no official safetensors name for GGUF tensor {}", g);
}

namespace {

// Row `row` (ncols values) of a float-valued tensor w (with its scale for F8_E4M3 / I8 FP4).
void decode_row(const SafetensorsDir& d, const SafetensorsDir::Tensor& w, const SafetensorsDir::Tensor* scale,
                int64_t row, int64_t ncols, float* out) {
    const uint8_t* p = d.bytes(w).data();
    if (w.dtype == "F32") {
        std::memcpy(out, p + size_t(row * ncols) * 4, size_t(ncols) * 4);
    } else if (w.dtype == "BF16" || w.dtype == "F16") {
        const bool bf = w.dtype == "BF16";
        for (int64_t c = 0; c < ncols; ++c) {
            uint16_t h;
            std::memcpy(&h, p + size_t(row * ncols + c) * 2, 2);
            out[c] = bf ? bf16_to_f32(h) : f16_to_f32(h);
        }
    } else if (w.dtype == "F8_E4M3" || w.dtype == "I8") {
        const bool fp4 = w.dtype == "I8";
        if (!scale || scale->dtype != "F8_E8M0" || scale->shape.size() != 2)
            fail("{}: tensor {} ({}) needs an F8_E8M0 2-D scale tensor", d.shard_path(w), w.name, w.dtype);
        const int64_t rows = w.shape[0];
        // FP8: one scale per 128 x 128 block; FP4: one per 32 values of a row.
        const int64_t srows = fp4 ? rows : (rows + 127) / 128, scols = fp4 ? ncols / 32 : (ncols + 127) / 128;
        if (scale->shape[0] != srows || scale->shape[1] != scols || (fp4 && ncols % 32))
            fail("{}: scale {} has shape [{}, {}], expected [{}, {}] for {} [{}, {}]", d.shard_path(*scale), scale->name,
                 scale->shape[0], scale->shape[1], srows, scols, w.name, rows, ncols);
        const uint8_t* s = d.bytes(*scale).data() + size_t((fp4 ? row : row / 128) * scols);
        if (fp4) {
            const uint8_t* q = p + size_t(row * ncols / 2);
            for (int64_t c = 0; c < ncols; ++c) out[c] = kE2M1[(q[c / 2] >> (4 * (c & 1))) & 15] * e8m0(s[c / 32]);
        } else {
            const uint8_t* q = p + size_t(row * ncols);
            for (int64_t c = 0; c < ncols; ++c) out[c] = e4m3(q[c]) * e8m0(s[c / 128]);
        }
    } else {
        fail("{}: tensor {} has dtype {}, not a float type this reader converts", d.shard_path(w), w.name, w.dtype);
    }
}

const SafetensorsDir::Tensor* scale_of(const SafetensorsDir& d, const SafetensorsDir::Tensor& w) {
    if (w.dtype != "F8_E4M3" && w.dtype != "I8") return nullptr;
    const std::string& n = w.name;
    const std::string base = n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0 ? n.substr(0, n.size() - 7) : n;
    const SafetensorsDir::Tensor* s = d.find(base + ".scale");
    if (!s) fail("{}: {} tensor {} has no scale tensor {}.scale", d.shard_path(w), w.dtype, n, base);
    return s;
}

// The official [out, in] (or [n]) shape of a template tensor, checked.
void check_shape(const SafetensorsDir& d, const SafetensorsDir::Tensor& w, const std::vector<int64_t>& want,
                 const std::string& gguf_name) {
    std::vector<int64_t> have = w.shape;
    if (w.dtype == "I8" && !have.empty()) have.back() *= 2;  // two FP4 codes per byte
    if (have != want)
        fail("{}: tensor {} has shape {}, template {} needs {}", d.shard_path(w), w.name, fmt::join(have, "x"),
             gguf_name, fmt::join(want, "x"));
}

}  // namespace

void SafetensorsDir::plain_rows(const gguf::TensorInfo& t, int64_t row0, int64_t n, float* out) const {
    const Tensor& w = tensor(hf_name(t.name));
    std::vector<int64_t> want;
    for (int i = int(t.n_dims) - 1; i >= 0; --i) want.push_back(t.ne[size_t(i)]);
    check_shape(*this, w, want, t.name);
    const Tensor* s = scale_of(*this, w);
    for (int64_t r = 0; r < n; ++r) decode_row(*this, w, s, row0 + r, t.ne[0], out + r * t.ne[0]);
}

void SafetensorsDir::expert_rows(const gguf::TensorInfo& t, int64_t row0, int64_t n, float* out) const {
    const std::string stem = hf_name(t.name);
    const size_t at = stem.rfind('.');
    for (int64_t r = 0; r < n; ++r) {
        const int64_t row = row0 + r, e = row / t.ne[1];
        const Tensor& w = tensor(fmt::format("{}.{}.{}.weight", stem.substr(0, at), e, stem.substr(at + 1)));
        check_shape(*this, w, {t.ne[1], t.ne[0]}, t.name);
        decode_row(*this, w, scale_of(*this, w), row % t.ne[1], t.ne[0], out + r * t.ne[0]);
    }
}

void SafetensorsDir::release_pages() const {
    for (const auto& s : shards_)
        if (s->map) madvise(const_cast<uint8_t*>(s->map), s->size, MADV_DONTNEED);
}

RowSource SafetensorsDir::rows() const {
    return [this](const gguf::TensorInfo& t, int64_t row0, int64_t n, float* out) {
        if (parse_expert(t.name).w) expert_rows(t, row0, n, out);
        else plain_rows(t, row0, n, out);
    };
}

bool SafetensorsDir::raw(const PlanItem& item, std::span<uint8_t> out) const {
    const gguf::TensorInfo& t = *item.info;
    if (item.type == TensorType::I32) {
        const Tensor& w = tensor(hf_name(t.name));
        if (w.dtype != "I64" && w.dtype != "I32")
            fail("{}: tensor {} has dtype {}, expected I64 for {}", shard_path(w), w.name, w.dtype, t.name);
        const uint8_t* p = bytes(w).data();
        const size_t es = dtype_size(w.dtype);
        if (size_t(t.n_elements()) * 4 != out.size() || bytes(w).size() != size_t(t.n_elements()) * es)
            fail("{}: tensor {} has {} bytes, template {} needs {} values", shard_path(w), w.name, bytes(w).size(), t.name,
                 t.n_elements());
        for (int64_t i = 0; i < t.n_elements(); ++i) {
            int64_t v = 0;
            if (es == 8) std::memcpy(&v, p + i * 8, 8);
            else { int32_t v32; std::memcpy(&v32, p + i * 4, 4); v = v32; }
            if (v < INT32_MIN || v > INT32_MAX) fail("{}: tensor {} value {} does not fit I32", shard_path(w), w.name, v);
            const int32_t v32 = int32_t(v);
            std::memcpy(out.data() + i * 4, &v32, 4);
        }
        return true;
    }
    if (item.type != TensorType::MXFP4 || !parse_expert(t.name).w) return false;
    // MXFP4 blocks of 32: the E8M0 scale as it is; codes from FP4 pairs (value 2k low nibble,
    // 2k+1 high) to ggml's order (value j low nibble of byte j, value j+16 high nibble).
    const std::string stem = hf_name(t.name);
    const size_t at = stem.rfind('.');
    const int64_t ncols = t.ne[0], rows_per = t.ne[1], nb = ncols / 32;
    auto* blocks = reinterpret_cast<quant::BlockMXFP4*>(out.data());
    for (int64_t e = 0; e < t.ne[2]; ++e) {
        const Tensor& w = tensor(fmt::format("{}.{}.{}.weight", stem.substr(0, at), e, stem.substr(at + 1)));
        if (w.dtype != "I8") return false;  // not FP4: quantized from its floats instead
        check_shape(*this, w, {rows_per, ncols}, t.name);
        const Tensor* s = scale_of(*this, w);
        if (s->shape != std::vector<int64_t>{rows_per, nb}) fail("{}: scale {} shape does not fit {}", shard_path(*s), s->name, w.name);
        const uint8_t* q = bytes(w).data();
        const uint8_t* sc = bytes(*s).data();
        for (int64_t r = 0; r < rows_per; ++r)
            for (int64_t b = 0; b < nb; ++b) {
                quant::BlockMXFP4& blk = blocks[(e * rows_per + r) * nb + b];
                const uint8_t* src = q + size_t(r * ncols / 2 + b * 16);
                auto code = [src](int v) { return (src[v / 2] >> (4 * (v & 1))) & 15; };
                blk.e = sc[r * nb + b];
                for (int j = 0; j < 16; ++j) blk.qs[j] = uint8_t(code(j) | (code(j + 16) << 4));
            }
    }
    return true;
}

}  // namespace ds4::quantize
