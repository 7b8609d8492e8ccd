// Partly filled sparse files (issue 38: the upstream peer check): with --sparse, the tensors of
// the classes asked for get their random data and every other tensor stays a hole, except the
// routed experts asked for, whose slices are written (the experts are a tensor's outermost
// dimension, so experts A..B are one contiguous run of bytes and the rest a hole). The router
// is then pinned to those experts, so a forward pass never reads a hole: exp_probs_b gets
// kPinBias on them (selection only; the gate weights still come from the router's scores) and
// the hash layers' tid2eid maps every token to ids among them. With nothing asked for, --sparse
// writes holes only, as before.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gguf/writer.h"
#include "model/deepseek4/layout.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::gen {

struct GenPlan;
struct GenTensor;

struct SparseFill {
    std::array<bool, deepseek4::kTensorClassCount> classes{};  // filled whole
    std::optional<std::pair<uint32_t, uint32_t>> experts;      // A..B (inclusive), filled and pinned
    std::vector<std::string> holes;  // name parts: tensors left holes anyway (zeroed outputs, for a bisect)
    bool any() const;
};

// Added to exp_probs_b of the pinned experts: more than any router score (sigmoid, in (0, 1))
// plus the random bias (0.1 N) can make up.
inline constexpr float kPinBias = 8.0f;

// "--fill LIST": class names as --type takes them ("all", "exps", ...) plus "nonrouted" (every
// class but the routed experts) and "norm", "tid2eid"; "--fill-experts A-B". Throws ds4::Error.
void add_fill_classes(SparseFill& f, const std::string& list);
void set_fill_experts(SparseFill& f, const std::string& range, uint32_t n_expert, uint32_t n_used);
// "--hole LIST": comma-separated parts of tensor names (e.g. attn_output_b,ffn_down).
void add_holes(SparseFill& f, const std::string& list);

// Writes tensor t's data (or the asked experts' slice of it) when the fill asks for it and
// returns true; false: leave it a hole.
bool write_filled(gguf::Writer& w, const GenTensor& t, const GenPlan& p, ThreadPool* pool);

}  // namespace ds4::gen
