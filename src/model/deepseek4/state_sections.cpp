// The DeepSeek V4 layer sections of a state file (docs/STATE_FORMAT.md): the raw window's
// rows in position order (not ring order), the compressed rows, and the compressors' open
// windows. Reading checks every count against the position, the window and the ratio before
// it allocates (lengths also against the bytes left: model/state_file.h); the fuzz target
// fuzz/state_fuzz.cpp runs these on arbitrary sections.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/error.h"
#include "model/deepseek4/sequence.h"
#include "model/state_file.h"

namespace ds4::deepseek4 {
namespace {

void write_compressor(model::StateWriter& w, const CompressorState& c) {
    const int64_t first = c.open_first(), next = c.next();
    w.u64(uint64_t(next));
    w.u64(uint64_t(first));
    for (int64_t p = first; p < next; ++p) w.floats(c.kv_row(p), size_t(c.row_width()));
    for (int64_t p = first; p < next; ++p) w.floats(c.score_row(p), size_t(c.row_width()));
}

void read_compressor(model::StateReader& r, CompressorState& c, int64_t pos, const char* what) {
    const uint64_t next = r.u64("compressor position"), first = r.u64("compressor window start");
    if (next != uint64_t(pos)) r.bad(fmt::format("{} at position {}, the tokens end at {}", what, next, pos));
    if (first != uint64_t(c.open_first_at(pos)))
        r.bad(fmt::format("{}: open window from position {}, expected {}", what, first, c.open_first_at(pos)));
    const uint64_t rows = next - first;
    const std::vector<float> kv = r.floats(rows * uint64_t(c.row_width()), what);
    const std::vector<float> score = r.floats(rows * uint64_t(c.row_width()), what);
    c.load(pos, kv.data(), score.data());
}

}  // namespace

void write_layer_section(model::StateWriter& w, const LayerState& L, int64_t pos) {
    w.u32(uint32_t(L.ratio));
    const int64_t n_raw = std::min(pos, L.window);
    w.u64(uint64_t(n_raw));
    for (int64_t p = pos - n_raw; p < pos; ++p) w.floats(L.raw_row(p), size_t(L.head_dim));
    if (L.ratio != 0) {
        w.u64(uint64_t(L.n_comp));
        w.floats(L.comp.data(), size_t(L.n_comp * L.head_dim));
        write_compressor(w, L.compressor);
    }
    if (L.ratio == 4) {
        w.u64(uint64_t(L.n_index_comp));
        w.floats(L.index_comp.data(), size_t(L.n_index_comp * L.indexer_dim));
        write_compressor(w, L.index_compressor);
    }
}

void read_layer_section(model::StateReader& r, uint32_t il, int64_t pos, LayerState& L) {
    const uint32_t ratio = r.u32("ratio");
    if (ratio != uint32_t(L.ratio)) r.bad(fmt::format("layer {}: ratio {}, expected {}", il, ratio, L.ratio));
    const uint64_t n_raw = r.u64("raw rows");
    if (n_raw != uint64_t(std::min(pos, L.window)))
        r.bad(fmt::format("layer {}: {} raw rows for {} positions and a window of {}", il, n_raw, pos, L.window));
    const std::vector<float> raw = r.floats(n_raw * uint64_t(L.head_dim), "raw rows");
    for (int64_t i = 0; i < int64_t(n_raw); ++i)
        std::memcpy(L.raw_row(pos - int64_t(n_raw) + i), &raw[size_t(i * L.head_dim)], sizeof(float) * L.head_dim);
    L.raw_valid_from = pos - int64_t(n_raw);
    if (L.ratio != 0) {
        const uint64_t n_comp = r.u64("compressed rows");
        if (n_comp != uint64_t(pos / L.ratio))
            r.bad(fmt::format("layer {}: {} compressed rows for {} positions at ratio {}", il, n_comp, pos, L.ratio));
        const std::vector<float> comp = r.floats(n_comp * uint64_t(L.head_dim), "compressed rows");
        std::copy(comp.begin(), comp.end(), L.comp.begin());
        L.n_comp = int64_t(n_comp);
        read_compressor(r, L.compressor, pos, "attention compressor");
    }
    if (L.ratio == 4) {
        const uint64_t n_index = r.u64("indexer rows");
        if (n_index != uint64_t(pos / 4))
            r.bad(fmt::format("layer {}: {} indexer rows for {} positions", il, n_index, pos));
        const std::vector<float> rows = r.floats(n_index * uint64_t(L.indexer_dim), "indexer rows");
        std::copy(rows.begin(), rows.end(), L.index_comp.begin());
        L.n_index_comp = int64_t(n_index);
        read_compressor(r, L.index_compressor, pos, "indexer compressor");
    }
}

}  // namespace ds4::deepseek4
