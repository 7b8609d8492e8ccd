// ds4 --token-ids: evaluate exact token ids (the debug front door of the forward pass).
#pragma once

#include "options.h"

namespace ds4::cli {

// Evaluates o.token_ids; writes all logits to o.dump_logits if set; prints o.n_predict greedy
// continuation ids on stdout (timings on stderr). Throws ds4::Error.
int run_eval_tokens(const Options& o);

}  // namespace ds4::cli
