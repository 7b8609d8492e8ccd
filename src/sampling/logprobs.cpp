#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace ds4::sampling {

LogprobsAt logprobs_at(std::span<const float> row, int32_t id, int top) {
    if (id < 0 || size_t(id) >= row.size()) fail("logprobs: token id {} outside the row of {}", id, row.size());
    if (top < 0 || size_t(top) > row.size()) fail("logprobs: {} alternatives of a row of {}", top, row.size());
    float max = -std::numeric_limits<float>::infinity();
    for (float x : row) max = std::max(max, x);
    if (!std::isfinite(max)) fail("logprobs: the row has no finite logit");
    // log-sum-exp in double: 129k terms summed in float would lose the small ones.
    double sum = 0;
    for (float x : row) sum += std::exp(double(x) - double(max));
    const double lse = double(max) + std::log(sum);
    auto lp = [&](int32_t i) { return float(std::max(double(row[size_t(i)]) - lse, double(kMinLogprob))); };

    LogprobsAt out;
    out.logprob = lp(id);
    if (top == 0) return out;
    std::vector<int32_t> ids(row.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
    auto more_likely = [&](int32_t a, int32_t b) {
        return row[size_t(a)] > row[size_t(b)] || (row[size_t(a)] == row[size_t(b)] && a < b);
    };
    std::partial_sort(ids.begin(), ids.begin() + top, ids.end(), more_likely);
    out.top.reserve(size_t(top));
    for (int k = 0; k < top; ++k) out.top.push_back({ids[size_t(k)], lp(ids[size_t(k)])});
    return out;
}

}  // namespace ds4::sampling
