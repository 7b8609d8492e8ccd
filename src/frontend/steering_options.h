// The directional-steering flags ds4 and ds4-server share (model/steering.h, docs/STEERING.md)
// and the steering file format:
//
//   --dir-steering-file FILE   raw little-endian f32, n_layer x n_embd, one unit direction per
//                              layer (repeatable: each file opens a slot, applied in order)
//   --dir-steering-ffn S       scale after the FFN output of the latest slot (default 1)
//   --dir-steering-attn S      scale after the attention output of the latest slot (default 0)
//
// A JSON sidecar next to FILE (FILE with .json for .f32) is optional; when present its
// "format" must be "ds4-directional-steering-v1" and its "shape", if given, [n_layer, n_embd].
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/steering.h"

namespace ds4::frontend {

inline constexpr const char* kSteeringFormat = "ds4-directional-steering-v1";

struct SteeringFlag {
    std::string file;
    float ffn = 1.0f, attn = 0.0f;
};

struct SteeringOptions {
    std::vector<std::string> files;      // as parsed; paired with the scales by resolve_steering
    std::vector<float> ffn, attn;
    std::vector<SteeringFlag> slots;     // the result
    CLI::Option *file_opt = nullptr, *ffn_opt = nullptr, *attn_opt = nullptr;
};

void add_steering_flags(CLI::App& app, SteeringOptions& s, const std::string& group = "Steering");
// After parsing: binds each scale flag to the file before it on the command line (fills
// s.slots). Returns the usage error, "" when fine.
std::string resolve_steering(const CLI::App& app, SteeringOptions& s);

// Reads a steering file (and its sidecar) for a model of n_layer x n_embd; throws ds4::Error
// naming the file and what is wrong (size, NaN or infinity, a row not of unit length, sidecar).
std::vector<float> read_steering_file(const std::string& path, uint32_t n_layer, int64_t n_embd);
// The sidecar path of a direction file: FILE.f32 -> FILE.json, else FILE + ".json".
std::string steering_sidecar(const std::string& path);

// The slots' files loaded for `model` (nullptr when there are none).
std::shared_ptr<const model::Steering> load_steering(const model::Model& model,
                                                     const std::vector<SteeringFlag>& slots);
// ds4-steer-build's arithmetic, per layer: d = normalize(good - bad); when orthogonalize,
// c = normalize(bad) and d = normalize(d - (d.c) c) (the part of the difference that is not
// the control's own direction). A zero vector stays zero (the layer is left alone). Means are
// [n_layer][n_embd].
std::vector<float> steering_direction(const std::vector<double>& good_mean, const std::vector<double>& bad_mean,
                                      uint32_t n_layer, int64_t n_embd, bool orthogonalize);
// Writes `path` (raw little-endian f32) and its sidecar: {"format", "shape", ...extra_json}
// (extra_json: a JSON object's text, or "").
void write_steering_file(const std::string& path, const std::vector<float>& dirs, uint32_t n_layer, int64_t n_embd,
                         const std::string& extra_json = "");

// One line describing the steering ("steering: 1 file (ffn 1, attn 0): FILE").
std::string describe(const model::Steering& s);

}  // namespace ds4::frontend
