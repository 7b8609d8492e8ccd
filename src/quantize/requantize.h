// The quantizer's pipeline: a plan (every tensor of a template GGUF with its output type), then
// the output produced one tensor at a time from a source of float rows (the template GGUF
// itself for GGUF -> GGUF, or an official safetensors directory), written, compared or both.
//
// Memory: one output tensor's bytes, plus per thread a few rows of floats, plus the pages of
// the input tensor being read (dropped from the mapping after each tensor): bounded by the
// largest tensor, not the model. The output is written under a temporary name and renamed
// into place when complete (gguf/writer.h); a failed run leaves no file.
//
// Bytes: a tensor whose type does not change and whose source is the GGUF is copied as it
// is; every other one is dequantized to f32 rows and quantized with ggml's quantizer
// (ggml_quantize.h), with the imatrix entry of its name when there is one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "quantize/imatrix.h"
#include "quantize/recipe.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::quantize {

struct PlanItem {
    const gguf::TensorInfo* info;  // the template's tensor (name, shape, source type)
    Family family;
    TensorType type;               // output type
    uint64_t bytes;                // output bytes
};

struct Plan {
    std::vector<PlanItem> items;   // template order
    uint64_t in_bytes = 0, out_bytes = 0, max_out_bytes = 0;
};

// Throws ds4::Error naming the tensor when a chosen type's block does not divide its rows.
Plan make_plan(const gguf::File& tmpl, const Recipe& recipe);
// Per family: tensors, types (input -> output), input and output size; then the total.
std::string describe(const Plan& plan);

// Float rows of a tensor: rows [row0, row0 + n) of the template tensor `t` (ne[0] values
// each) into `out`. Called from several threads at once for different rows.
using RowSource = std::function<void(const gguf::TensorInfo& t, int64_t row0, int64_t n, float* out)>;
// The template GGUF's own rows (dequantized).
RowSource gguf_rows(const gguf::File& f);

struct Producer {
    const gguf::File& tmpl;
    RowSource rows;
    bool source_is_tmpl = true;         // same-type tensors are copied byte for byte
    const Imatrix* imatrix = nullptr;
    ThreadPool* pool = nullptr;         // rows in parallel; nullptr: this thread
    // Tried first: fills a tensor's bytes from the source directly (returns false to go on).
    std::function<bool(const PlanItem&, std::span<uint8_t>)> raw;
    // Called after each tensor (a source drops the pages it read).
    std::function<void(const PlanItem&)> done;

    // The output bytes of one item into `out` (exactly item.bytes).
    void produce(const PlanItem& item, std::span<uint8_t> out) const;
};

// llama.cpp's general.file_type (enum llama_ftype) of the plan's output: the type holding the
// most bytes among the written matrices (2+ dimensions; llama.cpp's "except 1d tensors"), as
// llama.cpp's loader names a type (Q4_K: MOSTLY_Q4_K_M, MXFP4: MOSTLY_MXFP4_MOE); the q2
// recipe gives 19 (MOSTLY_IQ2_XXS), q4 15, all F32 0. write_output() writes it in place of a
// template's general.file_type; a template without the key gets none (the generator's files
// stay what they are).
uint32_t file_type(const Plan& plan);

struct WriteOptions {
    std::FILE* log = nullptr;       // progress and summary; nullptr: quiet
    bool progress_bar = false;      // a redrawn bar (a terminal) instead of a line per ~10%
    std::string imatrix_path;       // recorded as quantize.imatrix.file when set
};
// Writes the plan's output to `out_path` (metadata of the template, its alignment).
void write_output(const Plan& plan, const Producer& p, const std::string& out_path, const WriteOptions& o);

// Byte comparison of produced tensors with a reference GGUF (same names): per tensor the
// FNV-1a 64 checksums, the mismatching byte count and the first one. `only`: one tensor name
// (empty: every tensor). Prints a report to `out`; returns the number of tensors that differ.
int compare_output(const Plan& plan, const Producer& p, const gguf::File& ref, const std::string& only,
                   std::FILE* out);

uint64_t fnv1a64(std::span<const uint8_t> bytes);

}  // namespace ds4::quantize
