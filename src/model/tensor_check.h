// Checks of one tensor of a file against what a family's layout expects (family-neutral):
// shape, and a storage type the engine can compute with. Errors name the file and the tensor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"

namespace ds4::model {

// "[a, b, c]"
std::string shape_str(const std::vector<int64_t>& ne);

// What a tensor's type may be.
enum class TypeRule {
    F32,     // norms, biases, small vectors: always f32
    I32,     // index tables
    Weight,  // any weight format of the engine whose block divides the rows
};

// t (named `name` in messages) has exactly shape `ne` and a type `rule` allows.
void check_tensor(const gguf::File& f, const gguf::TensorInfo& t, const std::string& name,
                  const std::vector<int64_t>& ne, TypeRule rule);

}  // namespace ds4::model
