// DeepSeek V4's official safetensors release as a source of float rows for the quantizer.
//
// Layout (facts of the release, as upstream's deepseek4-quantize reads it):
//   model.safetensors.index.json   {"weight_map": {tensor name: shard file}}
//   each shard                     u64 header length, JSON header {name: {dtype, shape,
//                                  data_offsets [begin, end)}}, then the data (row-major)
//   dense matrices                 NAME.weight F8_E4M3 [out, in] + NAME.scale F8_E8M0
//                                  [out/128, in/128] (one power of two per 128x128 block)
//   routed experts                 layers.L.ffn.experts.E.w{1,2,3}.weight I8 [out, in/2] (two
//                                  E2M1 codes per byte, low nibble first) + .scale F8_E8M0
//                                  [out, in/32]
//   everything else                F32, BF16 or F16 as it is; ffn.gate.tid2eid I64
// Names: token_embd = embed.weight, output = head.weight, output_norm = norm.weight,
// output_hc_* = hc_head_*, blk.L.X = layers.L.<official name of X> (hf_name()).
// Every value dequantizes exactly (a small-mantissa code times a power of two).
//
// Errors name the safetensors file and the tensor (a missing tensor, a dtype or shape that
// does not fit the template, a short file).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "quantize/requantize.h"

namespace ds4::quantize {

class SafetensorsDir {
public:
    struct Tensor {
        std::string name, dtype;
        std::vector<int64_t> shape;  // row-major, outermost first
        size_t shard = 0;            // index into shards_
        uint64_t begin = 0, end = 0; // data offsets inside the shard's data section
    };

    // Reads the index and every shard's header (no tensor data). Throws ds4::Error.
    static SafetensorsDir open(const std::string& dir);
    SafetensorsDir(SafetensorsDir&&) noexcept;
    ~SafetensorsDir();

    const Tensor* find(const std::string& name) const;
    const Tensor& tensor(const std::string& name) const;  // throws naming the name
    // The tensor's bytes (mapped; valid while this object lives).
    std::span<const uint8_t> bytes(const Tensor& t) const;
    const std::string& shard_path(const Tensor& t) const;

    // The official name of a GGUF tensor (routed experts: the stacked name
    // "layers.L.ffn.experts.w1" without expert index or suffix). Throws for an unknown name.
    static std::string hf_name(const std::string& gguf_name);

    // Rows of template tensors from this directory (RowSource), and the tensors whose bytes
    // are not float rows: I32 tid2eid from I64, and routed experts stored as MXFP4, repacked
    // from the FP4 codes and E8M0 scales without rounding (returns false for the others).
    RowSource rows() const;
    bool raw(const PlanItem& item, std::span<uint8_t> out) const;
    // Drops every shard's resident pages (after a tensor: memory stays bounded by one tensor).
    void release_pages() const;

private:
    SafetensorsDir() = default;
    struct Shard;
    std::vector<std::unique_ptr<Shard>> shards_;
    std::map<std::string, Tensor> tensors_;
    void expert_rows(const gguf::TensorInfo& t, int64_t row0, int64_t n, float* out) const;
    void plain_rows(const gguf::TensorInfo& t, int64_t row0, int64_t n, float* out) const;
};

}  // namespace ds4::quantize
