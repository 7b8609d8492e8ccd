// MTP heads for the generated model (docs/GGUF_GEN.md, "MTP heads"): one random head written in
// upstream's MTP support GGUF layout (--mtp-out FILE: mtp.0.*) and/or embedded in the main file
// in llama.cpp's layout (--mtp-embedded: blk.<L>.* + blk.<L>.nextn.*, nextn_predict_layers 1).
//
// Both layouts hold the SAME weights for a seed, so they describe the same function: every
// tensor is generated under its support-file name (the random streams are per name and row)
// and written under the layout's name; eh_proj is [e_proj | h_proj] row by row; the head's
// norm is nextn.shared_head_norm; and the support file's hc_head_* are the main model's
// output_hc_* (llama.cpp's MTP graph mixes the HC streams with the root output_hc_*).
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "model/deepseek4/config.h"
#include "model/deepseek4/layout.h"

namespace ds4 {
class ThreadPool;
namespace gguf {
class Writer;
}
}  // namespace ds4

namespace ds4::gen {

struct GenPlan;

// A tensor of an output file: `spec` (name, shape, class) holds the values of `sources`,
// generated under their own names and concatenated row by row along ne[0] (one source: the
// tensor itself, or another tensor of the same shape).
struct GenTensor {
    deepseek4::TensorSpec spec;
    std::vector<deepseek4::TensorSpec> sources;
};

// Each spec generated under its own name.
std::vector<GenTensor> plain_tensors(const std::vector<deepseek4::TensorSpec>& specs);
// Upstream's MTP support GGUF (deepseek4::mtp_support_layout) for the trunk `cfg`.
std::vector<GenTensor> mtp_support_tensors(const deepseek4::ModelConfig& cfg);
// The same head as block cfg.n_layer in llama.cpp's layout (deepseek4::mtp_embedded_layout,
// with nextn.shared_head_norm).
std::vector<GenTensor> mtp_embedded_tensors(const deepseek4::ModelConfig& cfg);

// The MTP support file's metadata, as upstream's has it: general.architecture
// "deepseek4_mtp_support", general.name, deepseek4.expert_count, deepseek4.mtp_layer_count = 1
// and deepseek4.nextn_predict_layers = 1 (upstream's loader checks none of them; its tensors'
// shapes come from the trunk).
void write_mtp_support_metadata(gguf::Writer& w, const deepseek4::ModelConfig& cfg);

// The bytes of `t` in storage type `type` (generate_tensor of each source, rows interleaved).
void generate_gen_tensor(const GenTensor& t, TensorType type, const deepseek4::ModelConfig& cfg, uint64_t seed,
                         bool exact_quant, ThreadPool* pool, std::span<uint8_t> out);

// Turns the MTP outputs of `plan` on: `embedded` sets cfg.n_nextn = 1 (the main file then
// holds the head), `support_path` (may be empty) names the support file to write besides.
// Throws ds4::Error when support_path is the main output `out_path`.
void enable_mtp(GenPlan& plan, bool embedded, const std::string& support_path, const std::string& out_path);

}  // namespace ds4::gen
