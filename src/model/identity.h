// A 16-byte identity of a model's layout, for snapshots stored outside the process (the disk KV
// cache, ds4's /save): XXH3-128 over ModelInfo::metadata_hash and every tensor's name, type and
// shape in file order. Equal for the same model file; different when the metadata or any
// tensor's layout differs (another quantization of the same weights included), and when the
// model is steered (model/steering.h; non-zero scales: the directions and scales count).
#pragma once

#include <array>
#include <cstdint>

#include "model/model.h"

namespace ds4::model {

std::array<uint8_t, 16> identity(const Model& m);

// identity() plus a sample of every tensor's bytes (model/file_hashes.h weights_hash): differs
// also between files of one layout whose weights differ (two quantizations with and without an
// imatrix). Names the model's subfolder of a shared disk KV cache (kvcache/model_dir.h).
std::array<uint8_t, 16> weights_identity(const Model& m);

}  // namespace ds4::model
