// Split files: a standalone GGUF holding the tensors of one layer range of a deepseek4 model
// (upstream ships V4 PRO Q4 as two, "0:30" and "31:output"). Every metadata key of the model is
// copied unchanged, so the metadata hash (and with it saved states of the whole model and of
// its ranges) stays the same, and one key records the range: ds4.split.layers = "0:30". The
// tensors are copied byte for byte in the model's order, at the model's alignment. A split file
// is opened like the whole file with that range (OpenOptions::layers); opening it for layers it
// lacks fails naming the missing tensor and the range the file holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/file_hashes.h"
#include "model/layer_range.h"

namespace ds4::gguf {
class File;
}

namespace ds4::deepseek4 {

// The metadata key a split file records its range in (LayerRange::str(), e.g. "31:output").
// Left out of the metadata hash: a split file is the same model.
using model::kSplitLayersKey;  // model/file_hashes.h

// The range a split file records; nullopt for a file that is not a split.
std::optional<std::string> split_layers(const gguf::File& f);

struct SplitSummary {
    model::LayerRange range;
    size_t tensors = 0;       // copied
    uint64_t tensor_bytes = 0;  // their data bytes
    uint64_t file_bytes = 0;    // of the written file
};

// Writes the tensors of `layers` (LayerRange::parse syntax) of the deepseek4 model at `in` to a
// new GGUF at `out`, atomically (temporary file + rename; a failure leaves no file and an older
// `out` unchanged). `in` may itself be a split holding the range. Throws ds4::Error when `in` is
// not a deepseek4 GGUF or fails its layout, when the range is outside the model or not held
// by `in`, when `out` names `in`, or on I/O errors.
SplitSummary write_split(const std::string& in, const std::string& layers, const std::string& out);

}  // namespace ds4::deepseek4
