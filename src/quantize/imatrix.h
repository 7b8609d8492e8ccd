// Importance matrices for the quantizer, as llama-quantize reads them: llama.cpp's legacy
// binary .dat (what `ds4 --imatrix-out` and upstream's collector write) and llama.cpp's GGUF
// imatrix (<name>.in_sum2 + <name>.counts). Values are normalised as llama-quantize does:
// legacy sums / ncall (as they are when ncall is 0); GGUF in_sum2 / count per expert (1 where
// an expert has no count).
//
// One entry per GGUF tensor name, n_per_row values for a 2-D tensor or n_expert * n_per_row
// for a routed-expert tensor (expert e's weights at e * n_per_row).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ds4::quantize {

struct Imatrix {
    std::map<std::string, std::vector<float>> entries;
    std::vector<std::string> datasets;
    int chunks = 0;

    // Reads either format (a GGUF file by its magic). Throws ds4::Error naming the file, the
    // byte offset and the entry on a short or malformed file.
    static Imatrix load(const std::string& path);
    // The legacy .dat bytes of `entries` with ncall 1 (so load() gives the values back exactly).
    void save_legacy(const std::string& path) const;
    // The weights of tensor `name` for matrix `index` (expert) of `n_per_row` columns:
    // nullptr when there is no entry; throws when the entry's size fits neither one row
    // nor n_matrices rows.
    const float* weights(const std::string& name, int64_t n_per_row, int64_t n_matrices, int64_t index) const;
};

}  // namespace ds4::quantize
