#include "model/blocks/rows.h"

namespace ds4::blocks {

Rows::Rows(model::Batch b) {
    for (const model::BatchItem& it : b) {
        model::Sequence* seq = it.seq;
        const int64_t m = int64_t(it.tokens.size());
        spans.push_back({seq, n, m, seq->pos()});
        for (int64_t t = 0; t < m; ++t) {
            token.push_back(it.tokens[size_t(t)]);
            pos.push_back(seq->pos() + t);
            span_of.push_back(int32_t(spans.size() - 1));
        }
        n += m;
    }
}

}  // namespace ds4::blocks
