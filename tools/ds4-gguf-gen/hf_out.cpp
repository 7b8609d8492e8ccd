#include "hf_out.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include "common/error.h"
#include "common/file_io.h"
#include "common/half.h"
#include "mtp.h"
#include "quantize/safetensors.h"
#include "weights.h"

namespace ds4::gen {
namespace {

namespace fs = std::filesystem;

struct Entry {
    std::string name, dtype;
    std::vector<int64_t> shape;  // row-major, outermost first
    uint64_t bytes = 0;
    std::function<void(uint8_t*)> fill;
};

float e4m3_value(int code) {  // non-negative codes 0..126
    const int exp = code >> 3, man = code & 7;
    return exp == 0 ? std::ldexp(float(man), -9) : std::ldexp(1.0f + float(man) / 8.0f, exp - 7);
}

// Nearest code of |v| among `n` increasing magnitudes (ties to the even code), sign in `sign_bit`.
uint8_t nearest_code(float v, const float* mags, int n, uint8_t sign_bit) {
    const float a = std::fabs(v);
    const int hi = int(std::lower_bound(mags, mags + n, a) - mags);
    int c;
    if (hi >= n) c = n - 1;
    else if (hi == 0) c = 0;
    else {
        const float dl = a - mags[hi - 1], dh = mags[hi] - a;
        c = dl < dh ? hi - 1 : dh < dl ? hi : ((hi - 1) % 2 == 0 ? hi - 1 : hi);
    }
    return uint8_t(c | (std::signbit(v) && c ? sign_bit : 0));
}

// E8M0 exponent of the smallest power of two s with amax / s <= max.
uint8_t scale_exponent(float amax, float max) {
    if (!(amax > 0)) return 127;
    int k = std::ilogb(amax / max);
    while (std::ldexp(max, k) < amax) ++k;
    while (k > -126 && std::ldexp(max, k - 1) >= amax) --k;
    return uint8_t(std::clamp(k + 127, 1, 254));
}

struct Codes {
    float e4m3[127];
    float e2m1[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
    Codes() {
        for (int c = 0; c < 127; ++c) e4m3[c] = e4m3_value(c);
    }
};
const Codes& codes() {
    static const Codes c;
    return c;
}

float pow2(uint8_t e) { return std::bit_cast<float>(uint32_t(e) << 23); }

// rows x cols floats -> FP8 E4M3 codes (rows x cols) + E8M0 scales per 128 x 128 block.
void encode_fp8(const std::vector<float>& x, int64_t rows, int64_t cols, uint8_t* q, uint8_t* s) {
    const int64_t sr = (rows + 127) / 128, sc = (cols + 127) / 128;
    for (int64_t br = 0; br < sr; ++br)
        for (int64_t bc = 0; bc < sc; ++bc) {
            float amax = 0;
            for (int64_t r = br * 128; r < std::min(rows, br * 128 + 128); ++r)
                for (int64_t c = bc * 128; c < std::min(cols, bc * 128 + 128); ++c) amax = std::max(amax, std::fabs(x[size_t(r * cols + c)]));
            const uint8_t e = scale_exponent(amax, 448.f);
            s[br * sc + bc] = e;
            for (int64_t r = br * 128; r < std::min(rows, br * 128 + 128); ++r)
                for (int64_t c = bc * 128; c < std::min(cols, bc * 128 + 128); ++c)
                    q[r * cols + c] = nearest_code(x[size_t(r * cols + c)] / pow2(e), codes().e4m3, 127, 0x80);
        }
}

// One row of cols floats -> FP4 pairs (cols / 2 bytes, value 2k in the low nibble) + E8M0
// scales per 32 values.
void encode_fp4_row(const float* x, int64_t cols, uint8_t* q, uint8_t* s) {
    for (int64_t b = 0; b < cols / 32; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
        const uint8_t e = scale_exponent(amax, 6.f);
        s[b] = e;
        for (int j = 0; j < 32; j += 2) {
            const uint8_t lo = nearest_code(x[b * 32 + j] / pow2(e), codes().e2m1, 8, 8);
            const uint8_t hi = nearest_code(x[b * 32 + j + 1] / pow2(e), codes().e2m1, 8, 8);
            q[(b * 32 + j) / 2] = uint8_t(lo | (hi << 4));
        }
    }
}

void put_f32(const std::vector<float>& x, uint8_t* out) { std::memcpy(out, x.data(), x.size() * 4); }
void put_bf16(const std::vector<float>& x, uint8_t* out) {
    for (size_t i = 0; i < x.size(); ++i) {
        const uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
    }
}

std::string dense_dtype(const deepseek4::TensorSpec& s, HfDtypes mode) {
    if (mode == HfDtypes::F32 || s.ne.size() == 1) return "F32";
    const std::string& n = s.name;
    if (n == "token_embd.weight" || n == "output.weight" || s.cls == deepseek4::TensorClass::Router) return "BF16";
    if (s.cls == deepseek4::TensorClass::Hc || n.find("_ape.") != std::string::npos) return "F32";
    return s.ne[0] % 128 == 0 && s.ne[1] % 128 == 0 ? "F8_E4M3" : "BF16";
}

// The entries of one layout tensor (several for experts and FP8/FP4 weights with scales).
void add_entries(const deepseek4::TensorSpec& s, const GenPlan& p, HfDtypes mode, std::vector<Entry>& out) {
    const std::string hf = quantize::SafetensorsDir::hf_name(s.name);
    const uint64_t seed = p.seed;
    auto rows = [&s, seed](int64_t r0, int64_t n) {
        std::vector<float> x(size_t(n * s.ne[0]));
        for (int64_t r = 0; r < n; ++r) generate_row(s, init_for(s), seed, r0 + r, x.data() + r * s.ne[0]);
        return x;
    };
    if (s.cls == deepseek4::TensorClass::Tid2Eid) {
        const int64_t n = s.n_elements();
        out.push_back({hf, "I64", {s.ne[1], s.ne[0]}, uint64_t(n) * 8, [s, &p](uint8_t* o) {
                           std::vector<uint8_t> i32(size_t(s.n_elements()) * 4);
                           generate_tensor(s, TensorType::I32, p.cfg, p.seed, false, nullptr, i32);
                           for (int64_t i = 0; i < s.n_elements(); ++i) {
                               int32_t v;
                               std::memcpy(&v, i32.data() + i * 4, 4);
                               const int64_t w = v;
                               std::memcpy(o + i * 8, &w, 8);
                           }
                       }});
        return;
    }
    const int64_t in = s.ne[0], outd = s.ne.size() > 1 ? s.ne[1] : 1;
    if (s.cls == deepseek4::TensorClass::GateUpExps || s.cls == deepseek4::TensorClass::DownExps) {
        const size_t at = hf.rfind('.');
        const bool fp4 = mode == HfDtypes::Official && in % 32 == 0;
        for (int64_t e = 0; e < s.ne[2]; ++e) {
            const std::string base = fmt::format("{}.{}.{}", hf.substr(0, at), e, hf.substr(at + 1));
            if (!fp4) {
                out.push_back({base + ".weight", "F32", {outd, in}, uint64_t(outd * in) * 4,
                               [rows, e, outd](uint8_t* o) { put_f32(rows(e * outd, outd), o); }});
                continue;
            }
            // Weight and scale come from the same rows: each entry encodes them again (cheap).
            auto encode = [rows, e, outd, in](uint8_t* q, uint8_t* sc) {
                const auto x = rows(e * outd, outd);
                for (int64_t r = 0; r < outd; ++r) encode_fp4_row(x.data() + r * in, in, q + r * in / 2, sc + r * in / 32);
            };
            out.push_back({base + ".weight", "I8", {outd, in / 2}, uint64_t(outd * in / 2), [encode, outd, in](uint8_t* o) {
                               std::vector<uint8_t> sc(size_t(outd * in / 32));
                               encode(o, sc.data());
                           }});
            out.push_back({base + ".scale", "F8_E8M0", {outd, in / 32}, uint64_t(outd * in / 32), [encode, outd, in](uint8_t* o) {
                               std::vector<uint8_t> q(size_t(outd * in / 2));
                               encode(q.data(), o);
                           }});
        }
        return;
    }
    const std::string dtype = dense_dtype(s, mode);
    std::vector<int64_t> shape;
    for (size_t i = s.ne.size(); i-- > 0;) shape.push_back(s.ne[i]);
    if (dtype == "F8_E4M3") {
        const std::string base = hf.substr(0, hf.size() - 7);  // without ".weight"
        const int64_t sr = (outd + 127) / 128, sc = (in + 127) / 128;
        out.push_back({hf, dtype, shape, uint64_t(outd * in), [rows, outd, in, sr, sc](uint8_t* o) {
                           std::vector<uint8_t> scales(size_t(sr * sc));
                           encode_fp8(rows(0, outd), outd, in, o, scales.data());
                       }});
        out.push_back({base + ".scale", "F8_E8M0", {sr, sc}, uint64_t(sr * sc), [rows, outd, in, sr, sc](uint8_t* o) {
                           std::vector<uint8_t> q(size_t(outd * in));
                           encode_fp8(rows(0, outd), outd, in, q.data(), o);
                       }});
        return;
    }
    const uint64_t es = dtype == "F32" ? 4 : 2;
    out.push_back({hf, dtype, shape, uint64_t(s.n_elements()) * es, [rows, outd, dtype](uint8_t* o) {
                       const auto x = rows(0, outd);
                       if (dtype == "F32") put_f32(x, o);
                       else put_bf16(x, o);
                   }});
}

void write_shard(const std::string& path, const std::vector<Entry>& entries) {
    nlohmann::json h = nlohmann::json::object();
    uint64_t off = 0;
    for (const Entry& e : entries) {
        h[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {off, off + e.bytes}}};
        off += e.bytes;
    }
    h["__metadata__"] = {{"format", "pt"}};
    std::string header = h.dump();
    header.append((8 - header.size() % 8) % 8, ' ');
    AtomicFile f(path);
    const uint64_t n = header.size();
    f.write(&n, 8);
    f.write(header.data(), header.size());
    std::vector<uint8_t> buf;
    for (const Entry& e : entries) {
        buf.assign(e.bytes, 0);
        e.fill(buf.data());
        f.write(buf.data(), buf.size());
    }
    f.commit();
}

}  // namespace

void write_hf(const GenPlan& p, const std::string& dir, HfDtypes mode, std::FILE* log) {
    fs::create_directories(dir);
    const auto specs = deepseek4::tensor_layout(p.cfg);
    nlohmann::json map = nlohmann::json::object();
    int shard = 0;
    const int n_shards = int(p.cfg.n_layer) + 1;
    for (int layer = -1; layer < int(p.cfg.n_layer); ++layer, ++shard) {
        std::vector<Entry> entries;
        for (const auto& s : specs)
            if (s.layer == layer) add_entries(s, p, mode, entries);
        const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", shard + 1, n_shards);
        write_shard((fs::path(dir) / file).string(), entries);
        for (const Entry& e : entries) map[e.name] = file;
    }
    nlohmann::json index = {{"metadata", {{"generator", "ds4-gguf-gen"}, {"seed", p.seed}}}, {"weight_map", map}};
    write_file((fs::path(dir) / "model.safetensors.index.json").string(), index.dump(1));
    if (log) std::fprintf(log, "wrote %s: %d shards (%s dtypes)\n", dir.c_str(), n_shards, mode == HfDtypes::F32 ? "f32" : "official");
}

}  // namespace ds4::gen
