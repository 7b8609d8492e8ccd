// The directional-steering edit and the sublayer capture (model/steering.h), written once for
// every family: a sublayer builds an OutputEdit for its layer and passes each output row
// through apply() just before the row joins the residual (DeepSeek V4: before hc_post; GLM:
// before x += y).
#pragma once

#include <cstdint>

#include "model/blocks/rows.h"
#include "model/steering.h"

namespace ds4::blocks {

// F -= s * v * (v . F) for one row of D floats (the dot product accumulated in double, in
// index order, so the edit is the same whatever the batch or the thread).
void steer_row(float* F, const float* v, float s, int64_t D);

class OutputEdit {
public:
    // steering may be null (no steering: a trunk layer without it, or an extra block).
    OutputEdit(const model::Steering* steering, const Rows& rows, model::Sublayer which, uint32_t layer, int64_t D);

    // Whether apply() does anything (an edit, or a capture wanted by one of the rows'
    // sequences): when not, callers may skip it and copies made for it.
    bool active() const { return edits_ || captures_; }
    // Edits row t (F: D floats) in place, then records it if t is the last row of a sequence
    // that captures.
    void apply(int64_t t, float* F) const;

private:
    const model::Steering* steering_;
    const Rows& rows_;
    model::Sublayer which_;
    uint32_t layer_;
    int64_t D_;
    bool edits_ = false, captures_ = false;
};

}  // namespace ds4::blocks
