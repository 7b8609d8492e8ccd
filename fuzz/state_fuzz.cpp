// libFuzzer target for saved sequence states (model/state_file.h, docs/STATE_FORMAT.md) and the
// DeepSeek V4 layer sections (model/deepseek4/state_sections.cpp): any byte string must either
// load or throw ds4::Error -- never crash, overread or allocate without bound.
//
// The input is a state without its trailing checksum: the target appends the right XXH3-64 so
// that mutations reach the header and the sections instead of stopping at the checksum (which
// tests/model/state_test.cpp covers). The layers are those of a small fixed configuration
// (ratios 0, 4, 128; window 4, head_dim 8, indexer_dim 8), as fuzz/make_state_corpus.py
// writes them.
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "common/error.h"
#include "model/deepseek4/sequence.h"
#include "model/state_file.h"

namespace {

using namespace ds4;

constexpr int64_t kCtx = 1024;

struct Layers {
    deepseek4::ModelConfig cfg;
    std::vector<deepseek4::LayerWeights> w;
    Layers() {
        cfg.set_layer_count(3);
        cfg.compress_ratios = {0, 4, 128};
        cfg.window = 4;
        cfg.head_dim = 8;
        cfg.indexer_dim = 8;
        for (uint32_t il = 0; il < 3; ++il) {
            deepseek4::LayerWeights L;
            L.index = int(il);
            L.ratio = int(cfg.compress_ratios[il]);
            auto comp = [&](int ratio, int width) {
                deepseek4::CompressorWeights c;
                c.ratio = ratio;
                c.width = width;
                c.coff = ratio == 4 ? 2 : 1;
                return c;
            };
            if (L.ratio != 0) L.compressor = comp(L.ratio, int(cfg.head_dim));
            if (L.ratio == 4) L.indexer_compressor = comp(4, int(cfg.indexer_dim));
            w.push_back(L);
        }
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const Layers layers;
    std::vector<uint8_t> bytes(data, data + size);
    const uint64_t sum = XXH3_64bits(bytes.data(), bytes.size());
    bytes.resize(size + 8);
    std::memcpy(bytes.data() + size, &sum, 8);
    try {
        model::StateReader r(bytes, "fuzz");
        const model::StateHeader& h = r.header();
        const int64_t pos = int64_t(h.tokens.size());
        if (h.range.last >= 3 || pos > kCtx) return 0;  // the model would refuse these first
        for (uint32_t il = h.range.first; il <= h.range.last; ++il) {
            deepseek4::LayerState L(layers.cfg, layers.w[il], kCtx, 8);
            r.begin_layer(il);
            deepseek4::read_layer_section(r, il, pos, L);
            r.end_layer();
            // Whatever loaded is a consistent state: it rewinds to where it stands.
            if (!L.can_rewind(pos, pos)) __builtin_trap();
        }
        r.finish();
    } catch (const Error&) {
    }
    return 0;
}
