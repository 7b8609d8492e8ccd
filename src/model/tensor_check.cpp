#include "model/tensor_check.h"

#include <fmt/format.h>

#include "common/error.h"
#include "gguf/tensor_type.h"
#include "quant/quant.h"

namespace ds4::model {

std::string shape_str(const std::vector<int64_t>& ne) {
    std::string s = "[";
    for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
}

void check_tensor(const gguf::File& f, const gguf::TensorInfo& t, const std::string& name,
                  const std::vector<int64_t>& ne, TypeRule rule) {
    const std::vector<int64_t> got(t.ne.begin(), t.ne.begin() + t.n_dims);
    if (got != ne) fail("{}: tensor {}: shape {} expected {}", f.path(), name, shape_str(got), shape_str(ne));
    const std::string where = fmt::format("{}: tensor {}", f.path(), name);
    if (rule == TypeRule::F32) {
        if (t.type != TensorType::F32) fail("{}: type {} expected f32", where, tensor_type_name(t.type));
        return;
    }
    if (rule == TypeRule::I32) {
        if (t.type != TensorType::I32) fail("{}: type {} expected i32", where, tensor_type_name(t.type));
        return;
    }
    if (!quant::is_weight_format(t.type))
        fail("{}: type {} is not a weight format this engine supports ({})", where, tensor_type_name(t.type),
             quant::weight_format_names());
    const auto info = tensor_type_info(t.type);
    if (ne[0] % info->block_values != 0)
        fail("{}: rows of {} values are not a multiple of the {} block size {}", where, ne[0], info->name,
             info->block_values);
}

}  // namespace ds4::model
