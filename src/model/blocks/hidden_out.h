// The draft seam's outputs of a forward call (model/model.h, BatchItem::hidden and ::capture):
// copies of rows of the hidden state between layers into the callers' buffers. Family-neutral:
// a family calls write_captures after each layer of its range and write_hidden after the last.
#pragma once

#include <cstdint>

#include "model/layer_range.h"
#include "model/model.h"

namespace ds4::blocks {

// Throws ds4::Error (before anything changes) for a hidden state wanted without a buffer, a
// capture without a buffer, or capture layers outside `range` or not strictly ascending.
void check_draft_outputs(model::Batch b, const model::LayerRange& range);

// X holds the call's rows, [rows][width] floats, in batch order.
// Each item that wants its hidden state gets its last row (Last) or all its rows (All).
void write_hidden(model::Batch b, const float* X, int64_t width);
// Each item whose capture lists `layer` (at index k) gets all its rows at captured[k][rows].
void write_captures(model::Batch b, uint32_t layer, const float* X, int64_t width);
// Whether any item wants a hidden state or a capture.
bool wants_draft_outputs(model::Batch b);

}  // namespace ds4::blocks
