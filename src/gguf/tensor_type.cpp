#include "gguf/tensor_type.h"

#include <array>
#include <string>

#include "common/error.h"

namespace ds4 {
namespace {

struct Row {
    uint32_t id;
    TensorTypeInfo info;
};

// Block geometry of ggml's types (ggml.c type_traits); held equal to libggml-base by a test.
constexpr std::array kTypes = {
    Row{0, {"f32", 1, 4}},          Row{1, {"f16", 1, 2}},
    Row{2, {"q4_0", 32, 18}},       Row{3, {"q4_1", 32, 20}},
    Row{6, {"q5_0", 32, 22}},       Row{7, {"q5_1", 32, 24}},
    Row{8, {"q8_0", 32, 34}},       Row{9, {"q8_1", 32, 36}},
    Row{10, {"q2_K", 256, 84}},     Row{11, {"q3_K", 256, 110}},
    Row{12, {"q4_K", 256, 144}},    Row{13, {"q5_K", 256, 176}},
    Row{14, {"q6_K", 256, 210}},    Row{15, {"q8_K", 256, 292}},
    Row{16, {"iq2_xxs", 256, 66}},  Row{17, {"iq2_xs", 256, 74}},
    Row{18, {"iq3_xxs", 256, 98}},  Row{19, {"iq1_s", 256, 50}},
    Row{20, {"iq4_nl", 32, 18}},    Row{21, {"iq3_s", 256, 110}},
    Row{22, {"iq2_s", 256, 82}},    Row{23, {"iq4_xs", 256, 136}},
    Row{24, {"i8", 1, 1}},          Row{25, {"i16", 1, 2}},
    Row{26, {"i32", 1, 4}},         Row{27, {"i64", 1, 8}},
    Row{28, {"f64", 1, 8}},         Row{29, {"iq1_m", 256, 56}},
    Row{30, {"bf16", 1, 2}},        Row{34, {"tq1_0", 256, 54}},
    Row{35, {"tq2_0", 256, 66}},    Row{39, {"mxfp4", 32, 17}},
};

}  // namespace

std::optional<TensorTypeInfo> tensor_type_info(uint32_t type_id) {
    for (const Row& r : kTypes)
        if (r.id == type_id) return r.info;
    return std::nullopt;
}

std::string tensor_type_name(uint32_t type_id) {
    if (auto info = tensor_type_info(type_id)) return std::string(info->name);
    return "type#" + std::to_string(type_id);
}

std::optional<TensorType> tensor_type_from_name(std::string_view name) {
    for (const Row& r : kTypes) {
        std::string_view n = r.info.name;
        if (n.size() != name.size()) continue;
        bool same = true;
        for (size_t i = 0; i < n.size() && same; ++i)
            same = (n[i] | 0x20) == (name[i] | 0x20);  // ASCII case-insensitive ("Q8_0" too)
        if (same) return TensorType(r.id);
    }
    return std::nullopt;
}

size_t row_bytes(TensorType t, int64_t n) {
    auto info = tensor_type_info(t);
    if (!info) fail("unknown tensor type {}", uint32_t(t));
    if (n < 0 || n % info->block_values != 0)
        fail("row of {} values is not a multiple of the {} block size {}", n, info->name,
             info->block_values);
    return size_t(n / info->block_values) * info->block_bytes;
}

}  // namespace ds4
