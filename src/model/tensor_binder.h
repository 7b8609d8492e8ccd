// Views of a loaded GGUF's tensors as the forward pass uses them (family-neutral): matrices,
// routed-expert stacks and f32 vectors bound by name, without copies. The tensors were checked
// by the family's layout validation before binding.
#pragma once

#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/reader.h"
#include "model/expert_source.h"
#include "ops/matmul.h"
#include "quant/quant.h"

namespace ds4::model {

class TensorBinder {
public:
    explicit TensorBinder(const gguf::File& f) : f_(f) {}

    const gguf::TensorInfo& info(const std::string& name) const { return f_.tensor(name); }
    bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }

    // A tensor of any rank as a matrix of ne[0]-value rows (ne[1]*ne[2]*ne[3] of them).
    ops::Matrix matrix(const std::string& name) const {
        const gguf::TensorInfo& t = info(name);
        return ops::Matrix{t.type, t.ne[1] * t.ne[2] * t.ne[3], t.ne[0], f_.data(t), row_bytes(t.type, t.ne[0])};
    }
    // A [cols, rows_per_expert, n_expert] stack of expert matrices.
    ExpertMatrix experts(const std::string& name) const { return ExpertMatrix{matrix(name), info(name).ne[1]}; }
    const float* f32(const std::string& name) const {
        const gguf::TensorInfo& t = info(name);
        if (t.type != TensorType::F32) fail("{}: tensor {} must be f32", f_.path(), name);
        return reinterpret_cast<const float*>(f_.data(t));
    }
    const float* f32_optional(const std::string& name) const { return has(name) ? f32(name) : nullptr; }
    std::vector<float> dequantized(const std::string& name) const {
        const gguf::TensorInfo& t = info(name);
        std::vector<float> out(size_t(t.n_elements()));
        quant::dequantize_row(t.type, f_.data(t), out.data(), t.n_elements());
        return out;
    }

private:
    const gguf::File& f_;
};

}  // namespace ds4::model
