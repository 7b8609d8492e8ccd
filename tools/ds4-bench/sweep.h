// The frontier sweep of ds4-bench over one loaded model (frontier.h describes the walk):
// incremental prefill through a Session, then at each frontier Session::snapshot(), a timed
// greedy decode probe, Session::restore(); with spec_depths, more probes of the same tokens
// through speculative verification, each from the snapshot.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "engine/generator.h"
#include <vector>

#include "frontier.h"
#include "model/session.h"
#include "report.h"

namespace ds4::bench {

struct SweepOptions {
    SweepShape shape;
    model::SessionOptions session;    // session.ctx must hold context_needed(shape)
    int32_t eos = -1;               // never chosen by the probe (-1: no EOS)
    // Untimed prefill of the first `warmup` ids (capped at the sequence and ctx) before the
    // walk, then Session::reset(): a process's first prefill otherwise also pays for faulting in
    // its scratch buffers (docs/PERFORMANCE_JOURNAL.md, "The first prefill of a process").
    int64_t warmup = 0;
    // Sequences in each decode probe (>= 1): the frontier's state is copied to all of them,
    // sequence i starts from the (i+1)-th best token (so their routes differ from the first
    // step), and every step is one batched call with one row per sequence. Sequence 0 decodes
    // exactly what a single-sequence probe decodes.
    int64_t sessions = 1;
    // Speculative verification (sessions must be 1): at each frontier the greedy continuation
    // is decoded first, untimed, then the plain probe, then one probe per depth d and accept
    // p, verifying up to d drafts per step from an AidDrafter(p) over that continuation. Each
    // probe's tokens must equal the continuation's (else ds4::Error: verification broke its
    // promise); its row has draft_max d, aid_accept p and the plain probe's t/s.
    std::vector<int64_t> spec_depths;
    std::vector<double> spec_accepts{1.0};
    bool spec_backoff = false;  // GenerateOptions::draft_backoff in the verified probes
    // A real drafter (--mtp / --dspark): after the aid's probes (if any), one more verified
    // probe per frontier with up to drafter_depth drafts from a fresh drafter, primed untimed
    // with the rows it reads (the frontier's last positions evaluated again); its row has
    // aid_accept -1 and the same check against plain greedy decoding.
    std::function<std::unique_ptr<engine::Drafter>()> new_drafter;
    int64_t drafter_depth = 0;
    // Called just before and just after each timed decode probe (e.g. to read the SSD
    // streaming counters of the probe alone); either may be empty.
    std::function<void()> before_probe, after_probe;
};

// Called after each probe with its row and the ids it decoded (the plain probe's row first).
using RowCallback = std::function<void(const Row&, const std::vector<int32_t>& probe_ids)>;

// Walks `ids` (check_sequence() must accept them) and returns one row per probe. Throws
// ds4::Error (e.g. a context too small for the walk).
std::vector<Row> run_sweep(model::Model& model, const std::vector<int32_t>& ids,
                           const SweepOptions& opt, const RowCallback& on_row);

}  // namespace ds4::bench
