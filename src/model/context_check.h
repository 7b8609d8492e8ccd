// Whether a requested context fits the model and this machine, before anything is reserved:
// a context above the model's trained context, or one whose sequence state exceeds the memory
// this process can still get, is a ds4::Error that says what would fit.
#pragma once

#include <cstdint>

#include "model/model.h"

namespace ds4::model {

// Bytes this process can still allocate without swapping: /proc/meminfo's MemAvailable,
// capped by the cgroup's limit minus its usage (v2 memory.max / memory.current, or v1).
// -1 when neither can be read.
int64_t available_memory();

// The largest context whose sequence state takes at most `bytes` (0 when none does).
int64_t max_context_for_bytes(const Model& m, const SequenceOptions& opt, int64_t bytes);

// Throws when `sequences` sequences with `opt` would need more memory than available_memory()
// (nothing is checked when it is unknown). `flag` names the option in the message ("--ctx").
void check_memory(const Model& m, const SequenceOptions& opt, int64_t sequences = 1,
                  const char* flag = "context");
// Throws when opt.ctx is above the model's trained context.
void check_trained_context(const Model& m, int64_t ctx, const char* flag = "context");

}  // namespace ds4::model
