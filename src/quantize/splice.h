// ds4-splice: a mixed-layer file from two quantizations of the same model. The routed-expert
// tensors (ffn_gate_exps, ffn_up_exps, ffn_down_exps) of the chosen layers come from the
// donor, byte for byte (no requantisation); everything else, the metadata and the tensor order
// from the base. E.g. q2 experts everywhere but q4 in the last layers.
//
// Checks before anything is written: both files are the same model (architecture, block count,
// embedding length, expert count and expert width equal; every tensor name of the base
// present in the donor with the same shape), the layers exist, and each replaced tensor's type
// is one the engine runs. Errors throw ds4::Error naming the file, key or tensor.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace ds4::quantize {

// "37-42", "3,5,40-42": sorted layer indices; throws on a malformed or empty list.
std::set<int> parse_layer_list(const std::string& s);

struct SpliceItem {
    std::string name;
    std::string base_type, donor_type;
    uint64_t base_bytes = 0, donor_bytes = 0;
};
struct SplicePlan {
    std::vector<SpliceItem> replaced;
    uint64_t base_file_bytes = 0, out_tensor_bytes = 0;
};

// Checks the files and lists the tensors to take from the donor.
SplicePlan plan_splice(const std::string& base, const std::string& donor, const std::set<int>& layers);
// Writes the spliced file (temporary name, renamed when complete). The layer list is recorded
// as metadata quantize.splice.layers, the donor's file name as quantize.splice.donor.
void write_splice(const std::string& base, const std::string& donor, const std::set<int>& layers,
                  const std::string& layers_text, const std::string& out);

}  // namespace ds4::quantize
