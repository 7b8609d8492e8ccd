// `ds4 --imatrix-dataset F --imatrix-out F.dat` (docs/QUANTIZE.md, "Collecting an imatrix"):
// runs every prompt of a calibration dataset through the model on the CPU, each from an empty
// context, and writes the routed experts' (and the shared expert's) importance matrix as
// llama.cpp's legacy .dat for `ds4-quantize --imatrix`. The forward pass is the ordinary one
// (SSD streaming included); the values come through the sequence's expert observer
// (model/expert_observer.h), so the logits are those of any other run.
//
// Over a pipeline the coordinator sees only its own layers: the collection refuses --role
// (run it on one machine, with --ssd-streaming when the model does not fit in memory).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "model/expert_observer.h"
#include "quantize/imatrix_collect.h"

namespace ds4::cli {

struct Options;

struct ImatrixOptions {
    std::string dataset;              // --imatrix-dataset FILE (prompts split by DS4_IMATRIX_PROMPT lines)
    std::string out;                  // --imatrix-out FILE.dat
    int64_t max_prompts = 0;          // --imatrix-max-prompts N (0: all)
    int64_t max_tokens = 0;           // --imatrix-max-tokens N (0: no limit)
    int64_t min_expert_samples = 1;   // --imatrix-min-expert-samples N: fewer observations: 1s
    bool wanted() const { return !out.empty() || !dataset.empty(); }
};

void add_imatrix_flags(CLI::App& app, ImatrixOptions& o);

// Feeds what a sequence's MoE layers show to a collector: per row, its normalised input and,
// per chosen expert, the SwiGLU row times the routing weight; the shared expert's rows too.
class ImatrixObserver final : public model::ExpertObserver {
public:
    explicit ImatrixObserver(quantize::ImatrixCollector& c) : c_(c) {}
    void observe(const model::ExpertRows& r) override;

private:
    quantize::ImatrixCollector& c_;
};

// The collection; throws ds4::Error (no dataset or no output, a pipeline role, an unreadable
// dataset, a dataset without prompts).
int run_imatrix(const Options& o);

}  // namespace ds4::cli
