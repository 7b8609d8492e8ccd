#include "sparse_fill.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "mtp.h"
#include "options.h"
#include "rng.h"
#include "weights.h"

namespace ds4::gen {

using deepseek4::TensorClass;

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_routed(TensorClass c) { return c == TensorClass::GateUpExps || c == TensorClass::DownExps; }

// tid2eid rows of n_used distinct ids among a..b (the pinned experts).
void pinned_tid2eid(const deepseek4::TensorSpec& spec, uint64_t seed, uint32_t a, uint32_t b,
                    std::span<uint8_t> out) {
    const int64_t k = spec.ne[0], rows = spec.n_elements() / k;
    for (int64_t r = 0; r < rows; ++r) {
        Rng rng(seed, fnv1a64(spec.name), uint64_t(r));
        auto* row = reinterpret_cast<int32_t*>(out.data()) + r * k;
        for (int64_t i = 0; i < k; ++i) {
            for (;;) {
                const auto id = int32_t(a + rng.below(b - a + 1));
                if (std::find(row, row + i, id) == row + i) {
                    row[i] = id;
                    break;
                }
            }
        }
    }
}

}  // namespace

bool SparseFill::any() const {
    return experts.has_value() || std::find(classes.begin(), classes.end(), true) != classes.end();
}

void add_fill_classes(SparseFill& f, const std::string& list) {
    std::stringstream ss(list);
    std::string name;
    while (std::getline(ss, name, ',')) {
        if (name == "nonrouted") {
            for (int i = 0; i < deepseek4::kTensorClassCount; ++i)
                if (!is_routed(TensorClass(i))) f.classes[size_t(i)] = true;
        } else if (name == "norm") {
            f.classes[size_t(TensorClass::Norm)] = true;
        } else if (name == "tid2eid") {
            f.classes[size_t(TensorClass::Tid2Eid)] = true;
        } else if (auto cs = deepseek4::tensor_classes_from_name(name)) {
            for (TensorClass c : *cs) f.classes[size_t(c)] = true;
        } else {
            fail("--fill: unknown class '{}' (a --type class, nonrouted, norm or tid2eid)", name);
        }
    }
}

void set_fill_experts(SparseFill& f, const std::string& range, uint32_t n_expert, uint32_t n_used) {
    unsigned a = 0, b = 0;
    char dash = 0, extra = 0;
    if (std::sscanf(range.c_str(), "%u%c%u%c", &a, &dash, &b, &extra) != 3 || dash != '-' || a > b)
        fail("--fill-experts: '{}' is not A-B (e.g. 0-15)", range);
    if (b >= n_expert) fail("--fill-experts {}: the model has {} experts", range, n_expert);
    if (b - a + 1 < n_used)
        fail("--fill-experts {}: fewer experts than the {} each token uses", range, n_used);
    f.experts = std::pair<uint32_t, uint32_t>{a, b};
}

void add_holes(SparseFill& f, const std::string& list) {
    std::stringstream ss(list);
    std::string part;
    while (std::getline(ss, part, ','))
        if (!part.empty()) f.holes.push_back(part);
}

bool write_filled(gguf::Writer& w, const GenTensor& t, const GenPlan& p, ThreadPool* pool) {
    const auto& s = t.spec;
    const SparseFill& f = p.fill;
    for (const std::string& h : f.holes)
        if (s.name.find(h) != std::string::npos) return false;
    const TensorType type = p.types.of(s.cls);
    const bool pin = f.experts.has_value();
    const bool whole = f.classes[size_t(s.cls)] || (pin && (s.cls == TensorClass::Norm || s.cls == TensorClass::Tid2Eid));
    if (pin && is_routed(s.cls) && s.ne.size() == 3 && t.sources.size() == 1) {
        // Experts 0..B generated (rows are seeded by their index: the same bytes as the whole
        // tensor's), A..B written.
        const auto [a, b] = *f.experts;
        deepseek4::TensorSpec head = s;
        head.ne[2] = int64_t(b) + 1;
        std::vector<uint8_t> data(tensor_bytes(head, type));
        generate_tensor(head, type, p.cfg, p.seed, p.exact_quant, pool, data);
        const size_t per_expert = data.size() / (size_t(b) + 1);
        w.write_tensor_part(s.name, uint64_t(a) * per_expert,
                            std::span<const uint8_t>(data).subspan(size_t(a) * per_expert));
        return true;
    }
    if (!whole) return false;
    std::vector<uint8_t> data(tensor_bytes(s, type));
    if (pin && s.cls == TensorClass::Tid2Eid) {
        pinned_tid2eid(s, p.seed, f.experts->first, f.experts->second, data);
    } else {
        generate_gen_tensor(t, type, p.cfg, p.seed, p.exact_quant, pool, data);
    }
    if (pin && ends_with(s.name, "exp_probs_b.bias")) {
        auto* bias = reinterpret_cast<float*>(data.data());
        for (uint32_t e = f.experts->first; e <= f.experts->second; ++e) bias[e] += kPinBias;
    }
    w.write_tensor(s.name, data);
    return true;
}

}  // namespace ds4::gen
