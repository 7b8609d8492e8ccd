#include "dspark.h"

#include <algorithm>
#include <filesystem>
#include <span>

#include "common/error.h"
#include "gguf/writer.h"
#include "rng.h"
#include "weights.h"

namespace ds4::gen {

namespace {

using deepseek4::TensorClass;
using deepseek4::TensorSpec;

// The upstream converter's default DSpark values (gguf-tools/deepseek4-quantize.c).
constexpr uint32_t kFlashVocab = 129280, kFlashNoiseToken = 128799, kFlashMarkovRank = 256;

uint32_t block_values(TensorType t) { return tensor_type_info(t)->block_values; }

// DSpark tensors draw from their own streams: an MTP file generated with the same seed holds
// tensors of the same names (mtp.0.*), which must not come out equal.
uint64_t dspark_seed(uint64_t seed) { return seed ^ fnv1a64("dspark"); }

}  // namespace

DsparkShape dspark_shape(const GenPlan& plan) {
    const deepseek4::ModelConfig& c = plan.cfg;
    DsparkShape d;
    const uint32_t first = c.n_layer > 3 ? c.n_layer - 3 : 0;
    for (uint32_t il = first; il < c.n_layer; ++il) d.target_layers.push_back(il);
    if (c.n_embd >= 4096) {
        d.markov_rank = kFlashMarkovRank;
    } else {
        const uint32_t b = block_values(plan.types.of(TensorClass::Dense));
        d.markov_rank = (32 + b - 1) / b * b;
    }
    d.noise_token_id = c.n_vocab == kFlashVocab ? kFlashNoiseToken : c.n_vocab - 1;
    return d;
}

std::vector<TensorSpec> dspark_layout(const deepseek4::ModelConfig& c, const DsparkShape& d) {
    using C = TensorClass;
    const int64_t D = c.n_embd, V = c.n_vocab, R = d.markov_rank, HC = c.hc;
    const int64_t T = int64_t(d.target_layers.size());
    std::vector<TensorSpec> out;
    for (uint32_t s = 0; s < d.stages; ++s) {
        const std::string prefix = fmt::format("mtp.{}.", s);
        // A stage is a trunk block of ratio 0 routed by top-k; it is no trunk layer (-1).
        std::vector<TensorSpec> block = deepseek4::layer_tensor_layout(c, prefix, -1, {.ratio = 0, .hash = false});
        std::move(block.begin(), block.end(), std::back_inserter(out));
        auto add = [&](const char* suffix, std::vector<int64_t> ne, C cls) {
            out.push_back({prefix + suffix, std::move(ne), cls, -1});
        };
        if (s == 0) {
            add("main_proj.weight", {T * D, D}, C::Dense);
            add("main_norm.weight", {D}, C::Norm);
        }
        if (s + 1 == d.stages) {
            add("norm.weight", {D}, C::Norm);
            add("hc_head_fn.weight", {HC * D, HC}, C::Hc);
            add("hc_head_base.weight", {HC}, C::Norm);
            add("hc_head_scale.weight", {1}, C::Norm);
            add("markov_head.markov_w1.weight", {R, V}, C::Dense);
            add("markov_head.markov_w2.weight", {R, V}, C::Dense);
            add("confidence_head.proj.weight", {D + R, 1}, C::Dense);
        }
    }
    std::sort(out.begin(), out.end(), [](const TensorSpec& a, const TensorSpec& b) { return a.name < b.name; });
    return out;
}

uint64_t generate_dspark(const GenPlan& p, const std::string& out_path, std::FILE* log) {
    const DsparkShape d = dspark_shape(p);
    const std::vector<TensorSpec> layout = dspark_layout(p.cfg, d);
    for (const TensorSpec& s : layout) {
        const TensorType t = p.types.of(s.cls);
        if (s.ne[0] % block_values(t) != 0)
            fail("--dspark-out: tensor {} has rows of {} values, not a multiple of the {} block "
                 "size {}",
                 s.name, s.ne[0], tensor_type_name(t), block_values(t));
    }

    gguf::Writer w(out_path);
    w.set("general.architecture", gguf::Value::str("deepseek4-dspark"));
    w.set("general.name", gguf::Value::str("ds4-gguf-gen DSpark support (" + p.preset + ")"));
    w.set("dspark.block_size", gguf::Value::u32(d.block_size));
    w.set("dspark.markov_rank", gguf::Value::u32(d.markov_rank));
    w.set("dspark.noise_token_id", gguf::Value::u32(d.noise_token_id));
    w.set("dspark.target_layer_ids", gguf::Value::array_u32(d.target_layers));
    w.set("dspark.stage_count", gguf::Value::u32(d.stages));
    w.set("dspark.n_layers", gguf::Value::u32(d.stages));
    uint64_t max_bytes = 0;
    for (const TensorSpec& s : layout) {
        w.add_tensor(s.name, p.types.of(s.cls), s.ne);
        max_bytes = std::max(max_bytes, tensor_bytes(s, p.types.of(s.cls)));
    }
    w.begin_data();
    std::vector<uint8_t> buf(p.sparse ? 0 : max_bytes);
    for (const TensorSpec& s : layout) {
        if (p.sparse) {
            w.skip_tensor(s.name);
            continue;
        }
        const std::span<uint8_t> data(buf.data(), size_t(tensor_bytes(s, p.types.of(s.cls))));
        generate_tensor(s, p.types.of(s.cls), p.cfg, dspark_seed(p.seed), p.exact_quant, nullptr, data);
        w.write_tensor(s.name, data);
    }
    w.finish();
    const uint64_t size = std::filesystem::file_size(out_path);
    if (log)
        std::fprintf(log, "wrote %s: DSpark support, %u stages, block %u, markov rank %u, %zu tensors, %llu bytes\n",
                     out_path.c_str(), d.stages, d.block_size, d.markov_rank, layout.size(),
                     (unsigned long long)size);
    return size;
}

}  // namespace ds4::gen
