#include "mtp.h"

#include <cstring>
#include <filesystem>
#include <map>

#include "common/error.h"
#include "gguf/writer.h"
#include "options.h"
#include "weights.h"

namespace ds4::gen {

using deepseek4::ModelConfig;
using deepseek4::TensorSpec;

namespace {

std::map<std::string, TensorSpec> by_name(const std::vector<TensorSpec>& specs) {
    std::map<std::string, TensorSpec> m;
    for (const TensorSpec& s : specs) m.emplace(s.name, s);
    return m;
}

}  // namespace

std::vector<GenTensor> plain_tensors(const std::vector<TensorSpec>& specs) {
    std::vector<GenTensor> out;
    out.reserve(specs.size());
    for (const TensorSpec& s : specs) out.push_back({s, {s}});
    return out;
}

std::vector<GenTensor> mtp_support_tensors(const ModelConfig& cfg) {
    // The HC head is the trunk's output_hc_*, the mix llama.cpp's MTP graph uses.
    const auto trunk = by_name(deepseek4::tensor_layout(cfg));
    const std::map<std::string, std::string> shared = {
        {"mtp.0.hc_head_fn.weight", "output_hc_fn.weight"},
        {"mtp.0.hc_head_base.weight", "output_hc_base.weight"},
        {"mtp.0.hc_head_scale.weight", "output_hc_scale.weight"},
    };
    std::vector<GenTensor> out;
    for (const TensorSpec& s : deepseek4::mtp_support_layout(cfg)) {
        const auto it = shared.find(s.name);
        out.push_back({s, {it == shared.end() ? s : trunk.at(it->second)}});
    }
    return out;
}

std::vector<GenTensor> mtp_embedded_tensors(const ModelConfig& cfg) {
    const auto support = by_name(deepseek4::mtp_support_layout(cfg));
    const deepseek4::NextnLayout layout = deepseek4::mtp_embedded_layout(cfg, cfg.n_layer);
    const std::string prefix = fmt::format("blk.{}.", cfg.n_layer);
    const std::map<std::string, std::vector<std::string>> renamed = {
        {"nextn.eh_proj.weight", {"mtp.0.e_proj.weight", "mtp.0.h_proj.weight"}},
        {"nextn.enorm.weight", {"mtp.0.enorm.weight"}},
        {"nextn.hnorm.weight", {"mtp.0.hnorm.weight"}},
        {"nextn.shared_head_norm.weight", {"mtp.0.norm.weight"}},
    };
    std::vector<TensorSpec> specs = layout.required;
    for (const TensorSpec& s : layout.optional)
        if (s.name == prefix + "nextn.shared_head_norm.weight") specs.push_back(s);
    std::vector<GenTensor> out;
    for (const TensorSpec& s : specs) {
        const std::string suffix = s.name.substr(prefix.size());
        GenTensor t{s, {}};
        if (const auto it = renamed.find(suffix); it != renamed.end())
            for (const std::string& src : it->second) t.sources.push_back(support.at(src));
        else
            t.sources.push_back(support.at("mtp.0." + suffix));  // a block tensor
        out.push_back(std::move(t));
    }
    return out;
}

void write_mtp_support_metadata(gguf::Writer& w, const ModelConfig& cfg) {
    w.set("general.architecture", gguf::Value::str(deepseek4::kMtpSupportArchitecture));
    w.set("general.name", gguf::Value::str(cfg.name + " MTP support"));
    w.set(deepseek4::arch_key("expert_count"), gguf::Value::u32(cfg.n_expert));
    w.set(deepseek4::arch_key("mtp_layer_count"), gguf::Value::u32(1));
    w.set(deepseek4::arch_key("nextn_predict_layers"), gguf::Value::u32(1));
}

void generate_gen_tensor(const GenTensor& t, TensorType type, const ModelConfig& cfg, uint64_t seed,
                         bool exact_quant, ThreadPool* pool, std::span<uint8_t> out) {
    if (t.sources.size() == 1 && t.sources[0].ne == t.spec.ne)
        return generate_tensor(t.sources[0], type, cfg, seed, exact_quant, pool, out);
    // Rows concatenated: each source has the tensor's row count, and their row lengths (whole
    // blocks of `type`, checked by make_plan) add up to the tensor's.
    const int64_t rows = t.spec.n_elements() / t.spec.ne[0];
    int64_t width = 0;
    std::vector<std::vector<uint8_t>> parts;
    for (const TensorSpec& s : t.sources) {
        if (s.n_elements() / s.ne[0] != rows)
            fail("generator: {} has {} rows, {} has {}", s.name, s.n_elements() / s.ne[0], t.spec.name, rows);
        width += s.ne[0];
        parts.emplace_back(tensor_bytes(s, type));
        generate_tensor(s, type, cfg, seed, exact_quant, pool, parts.back());
    }
    if (width != t.spec.ne[0] || out.size() != tensor_bytes(t.spec, type))
        fail("generator: the sources of {} do not make up its rows", t.spec.name);
    uint8_t* dst = out.data();
    for (int64_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < parts.size(); ++i) {
            const size_t rb = row_bytes(type, t.sources[i].ne[0]);
            std::memcpy(dst, parts[i].data() + size_t(r) * rb, rb);
            dst += rb;
        }
}

void enable_mtp(GenPlan& plan, bool embedded, const std::string& support_path, const std::string& out_path) {
    if (!support_path.empty() && std::filesystem::weakly_canonical(support_path) ==
                                     std::filesystem::weakly_canonical(out_path))
        fail("--mtp-out {} names the model file itself", support_path);
    plan.mtp_embedded = embedded;
    plan.mtp_out = support_path;
    plan.cfg.n_nextn = embedded ? 1 : 0;
}

}  // namespace ds4::gen
