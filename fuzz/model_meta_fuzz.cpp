// libFuzzer target for the model metadata readers (docs/SPECULATIVE.md, spec/ARCHITECTURE.md):
// the deepseek4 configuration (block_count with nextn_predict_layers, per-layer arrays), the
// DSpark metadata (three key spellings, the target-layer array) and the MTP head layouts held
// against a file's tensor directory (shapes, types, tid2eid entries); and the glm-dsa
// configuration (GLM 5.2: MLA widths, indexer types array or its default) with its tensor
// layout. Any input must give a configuration or a ds4::Error with a one-line message, never a
// crash.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "common/error.h"
#include "gguf/reader.h"
#include "model/deepseek4/config.h"
#include "model/deepseek4/dspark.h"
#include "model/deepseek4/layout.h"
#include "model/glm/config.h"
#include "model/glm/layout.h"

namespace {

void one_line(const ds4::Error& e) {
    if (std::strchr(e.what(), '\n')) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace ds4::deepseek4;
    std::unique_ptr<ds4::gguf::File> f;
    try {
        f = ds4::gguf::File::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
    } catch (const ds4::Error& e) {
        one_line(e);
        return 0;
    }
    // The file's own configuration when it has one, else a small fixed one (a support file
    // carries no trunk hyperparameters).
    ModelConfig c;
    c.n_layer = 4;
    c.n_vocab = 64;
    c.n_embd = 64;
    c.compress_ratios.assign(c.n_layer, 0);
    try {
        c = ModelConfig::from_gguf(*f);
    } catch (const ds4::Error& e) {
        one_line(e);
    }
    try {
        const DsparkInfo info = read_dspark_metadata(*f, c);
        if (info.target_layers.empty() || info.block_size == 0) __builtin_trap();
    } catch (const ds4::Error& e) {
        one_line(e);
    }
    try {
        validate_specs(*f, c, mtp_support_layout(c));
    } catch (const ds4::Error& e) {
        one_line(e);
    }
    try {
        const NextnLayout n = mtp_embedded_layout(c, c.n_layer);
        validate_specs(*f, c, n.required);
        validate_specs(*f, c, n.optional, false);
    } catch (const ds4::Error& e) {
        one_line(e);
    }
    try {
        const ds4::glm::GlmConfig g = ds4::glm::GlmConfig::from_gguf(*f);
        if (g.indexer_full.size() != g.n_layer || !g.indexer_full[0]) __builtin_trap();
        ds4::glm::validate_tensors(*f, g, ds4::model::LayerRange::all(g.n_layer));
        ds4::glm::validate_specs(*f, ds4::glm::mtp_layout(g));
    } catch (const ds4::Error& e) {
        one_line(e);
    }
    return 0;
}
