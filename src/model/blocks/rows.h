// The rows of one forward call as the layers see them (family-neutral): batch items in order,
// each item's tokens in position order, with the sequence and position of every row.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace ds4::blocks {

struct Rows {
    struct Span {
        model::Sequence* seq;  // the family's own Sequence type (static_cast where needed)
        int64_t row0, n, p0;   // rows [row0, row0+n) at positions p0 .. p0+n-1
    };
    std::vector<Span> spans;      // one per batch item
    std::vector<int32_t> token;   // [rows]
    std::vector<int64_t> pos;     // [rows] absolute position
    std::vector<int32_t> span_of; // [rows] index into spans
    int64_t n = 0;

    explicit Rows(model::Batch b);
    const Span& span(int64_t r) const { return spans[size_t(span_of[size_t(r)])]; }
    bool qat(int64_t r) const { return span(r).seq->options().qat; }
    model::DecisionLog* decision_log(int64_t r) const { return span(r).seq->decision_log(); }
};

}  // namespace ds4::blocks
