#include "model/deepseek4/split.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <system_error>
#include <vector>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/deepseek4/config.h"
#include "model/deepseek4/layout.h"

namespace ds4::deepseek4 {

std::optional<std::string> split_layers(const gguf::File& f) {
    const gguf::Value* v = f.find(kSplitLayersKey);
    if (!v || !v->as_string()) return std::nullopt;
    return *v->as_string();
}

SplitSummary write_split(const std::string& in, const std::string& layers, const std::string& out) {
    const auto f = gguf::File::open(in, gguf::File::Load::Map);
    const gguf::Value* arch = f->find("general.architecture");
    if (!arch || !arch->as_string() || *arch->as_string() != kArchitecture)
        fail("{}: not a {} model (general.architecture is {})", in, kArchitecture,
             arch ? arch->to_string() : "missing");
    const ModelConfig cfg = ModelConfig::from_gguf(*f);
    SplitSummary sum;
    sum.range = model::LayerRange::parse(layers, cfg.n_layer);
    // Every tensor of the range present with its layout's shape and type (a split input that
    // lacks some says which range it holds), nothing foreign in the file.
    validate_tensors(*f, cfg, sum.range);
    std::error_code ec;
    if (std::filesystem::equivalent(in, out, ec))
        fail("{}: the output names the input file (write the split to another path)", out);

    // Which of the file's tensors the range needs: the layout's own rule, and for the tensors
    // the layout tolerates without listing (exp_probs_b on a hash layer) their layer.
    std::map<std::string, bool> needed;
    for (const TensorSpec& s : tensor_layout(cfg)) needed[s.name] = in_range(s, sum.range);
    auto keep = [&](const gguf::TensorInfo& t) {
        if (auto it = needed.find(t.name); it != needed.end()) return it->second;
        unsigned layer = 0;
        return std::sscanf(t.name.c_str(), "blk.%u.", &layer) == 1 && sum.range.contains(layer);
    };

    gguf::Writer w(out, f->alignment());
    for (const auto& [k, v] : f->metadata())
        if (k != "general.alignment" && k != kSplitLayersKey) w.set(k, v);
    w.set(kSplitLayersKey, gguf::Value::str(sum.range.str()));
    std::vector<const gguf::TensorInfo*> kept;
    for (const gguf::TensorInfo& t : f->tensors()) {
        if (!keep(t)) continue;
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims));
        kept.push_back(&t);
    }
    w.begin_data();
    for (const gguf::TensorInfo* t : kept) {
        w.write_tensor(t->name, {f->data(*t), size_t(t->n_bytes)});
        sum.tensor_bytes += t->n_bytes;
    }
    w.finish();
    sum.tensors = kept.size();
    sum.file_bytes = std::filesystem::file_size(out);
    return sum;
}

}  // namespace ds4::deepseek4
