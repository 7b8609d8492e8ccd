// The checks every model::Model implementation makes on a Batch before anything changes
// (model/model.h): the sequences are its own, each appears once, every item has tokens, the
// token ids are in the vocabulary, every context has room (when the call advances the
// sequences), and a buffer is given where logits are wanted. Used by the model families and by
// the pipeline's PipelineModel, so they refuse the same batches with the same messages.
#pragma once

#include <cstdint>
#include <functional>

#include "model/model.h"

namespace ds4::blocks {

// `ours(seq)`: whether seq (never null) is a sequence of the calling model. Throws ds4::Error
// ("batch: ...", "token id ... out of range", "context exceeded: ...") on the first problem.
void check_batch(model::Batch b, uint32_t n_vocab, bool advancing,
                 const std::function<bool(const model::Sequence&)>& ours);

}  // namespace ds4::blocks
