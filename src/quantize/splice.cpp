#include "quantize/splice.h"

#include <filesystem>
#include <map>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "quant/quant.h"

namespace ds4::quantize {
namespace {

constexpr const char* kExpertSuffixes[] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};

// The metadata both files must agree on (a "-" entry: not present in either).
std::string meta_string(const gguf::File& f, const std::string& key) {
    const gguf::Value* v = f.find(key);
    if (!v) return "-";
    try {
        return std::to_string(f.get_u64(key));
    } catch (const Error&) {
        return f.get_string(key);
    }
}

void check_same_model(const gguf::File& b, const gguf::File& d) {
    const std::string arch = meta_string(b, "general.architecture");
    for (const std::string& k : {std::string("general.architecture"), arch + ".block_count", arch + ".embedding_length",
                                 arch + ".expert_count", arch + ".expert_feed_forward_length"}) {
        const std::string x = meta_string(b, k), y = meta_string(d, k);
        if (x != y)
            fail("{} and {} are different models: {} is {} in the base, {} in the donor", b.path(), d.path(), k, x, y);
    }
    for (const auto& t : b.tensors()) {
        const gguf::TensorInfo* o = d.find_tensor(t.name);
        if (!o) fail("{} and {} are different models: tensor {} is not in the donor", b.path(), d.path(), t.name);
        if (o->ne != t.ne)
            fail("{} and {} are different models: tensor {} is {} in the base, {} in the donor", b.path(), d.path(),
                 t.name, t.shape_string(), o->shape_string());
    }
}

bool replaced(const std::string& name, const std::set<int>& layers) {
    for (int l : layers)
        for (const char* s : kExpertSuffixes)
            if (name == "blk." + std::to_string(l) + "." + s) return true;
    return false;
}

}  // namespace

std::set<int> parse_layer_list(const std::string& s) {
    std::set<int> out;
    size_t pos = 0;
    while (pos <= s.size()) {
        const size_t comma = std::min(s.find(',', pos), s.size());
        const std::string part = s.substr(pos, comma - pos);
        const size_t dash = part.find('-');
        try {
            size_t used = 0;
            const int a = std::stoi(part.substr(0, dash), &used);
            if (used != (dash == std::string::npos ? part.size() : dash)) throw std::invalid_argument("");
            int b = a;
            if (dash != std::string::npos) {
                b = std::stoi(part.substr(dash + 1), &used);
                if (used != part.size() - dash - 1) throw std::invalid_argument("");
            }
            if (a < 0 || b < a || b - a > 100000) throw std::invalid_argument("");
            for (int l = a; l <= b; ++l) out.insert(l);
        } catch (const std::exception&) {
            fail("--layers '{}': '{}' is not a layer or a range A-B (e.g. 37-42 or 3,5,40-42)", s, part);
        }
        pos = comma + 1;
    }
    return out;
}

SplicePlan plan_splice(const std::string& base, const std::string& donor, const std::set<int>& layers) {
    const auto b = gguf::File::open(base);
    const auto d = gguf::File::open(donor);
    check_same_model(*b, *d);
    const std::string arch = meta_string(*b, "general.architecture");
    const uint64_t n_layer = b->get_u64(arch + ".block_count");
    for (int l : layers)
        if (uint64_t(l) >= n_layer) fail("--layers: layer {} is not in {} ({} layers)", l, base, n_layer);
    SplicePlan p;
    p.base_file_bytes = b->file_size();
    for (const auto& t : b->tensors()) {
        if (!replaced(t.name, layers)) {
            p.out_tensor_bytes += t.n_bytes;
            continue;
        }
        const gguf::TensorInfo& o = d->tensor(t.name);
        if (!quant::is_weight_format(o.type))
            fail("{}: tensor {} is {}, not a format this engine runs ({})", donor, o.name, tensor_type_name(o.type),
                 quant::weight_format_names());
        p.replaced.push_back({t.name, tensor_type_name(t.type), tensor_type_name(o.type), t.n_bytes, o.n_bytes});
        p.out_tensor_bytes += o.n_bytes;
    }
    if (p.replaced.empty()) fail("{}: the layers chosen hold no routed-expert tensors", base);
    return p;
}

void write_splice(const std::string& base, const std::string& donor, const std::set<int>& layers,
                  const std::string& layers_text, const std::string& out) {
    plan_splice(base, donor, layers);  // every check first
    const auto b = gguf::File::open(base);
    const auto d = gguf::File::open(donor);
    gguf::Writer w(out, b->alignment());
    for (const auto& [key, value] : b->metadata())
        if (key != "general.alignment") w.set(key, value);
    w.set("quantize.splice.layers", gguf::Value::str(layers_text));
    w.set("quantize.splice.donor", gguf::Value::str(std::filesystem::path(donor).filename().string()));
    auto source = [&](const gguf::TensorInfo& t) -> std::pair<const gguf::File*, const gguf::TensorInfo*> {
        if (replaced(t.name, layers)) return {d.get(), &d->tensor(t.name)};
        return {b.get(), &t};
    };
    for (const auto& t : b->tensors()) {
        const auto [f, s] = source(t);
        w.add_tensor(t.name, s->type, std::vector<int64_t>(s->ne.begin(), s->ne.begin() + s->n_dims));
    }
    w.begin_data();
    for (const auto& t : b->tensors()) {
        const auto [f, s] = source(t);
        w.write_tensor(t.name, {f->data(*s), size_t(s->n_bytes)});
    }
    w.finish();
}

}  // namespace ds4::quantize
