#include "server/scheduler_cost.h"

#include <algorithm>
#include <cmath>

namespace ds4::server {
namespace {

// Each older step weighs this much less than the next (about 30 steps of memory).
constexpr double kDecay = 0.97;

}  // namespace

StepCost::StepCost(Options o) : opt_(o) {
    opt_.min_piece = std::max<int64_t>(1, opt_.min_piece);
    opt_.max_piece = std::max(opt_.min_piece, opt_.max_piece);
    opt_.stall = std::max(1.0, opt_.stall);
}

void StepCost::observe(int64_t rows, double seconds) {
    if (rows <= 0 || !(seconds >= 0) || !std::isfinite(seconds)) return;
    const double x = double(rows);
    w_ = w_ * kDecay + 1;
    x_ = x_ * kDecay + x;
    xx_ = xx_ * kDecay + x * x;
    y_ = y_ * kDecay + seconds;
    xy_ = xy_ * kDecay + x * seconds;
    fit();
}

void StepCost::fit() {
    // Weighted least squares of seconds = fixed + per_row x rows. The slope needs steps of
    // different sizes: a spread of rows below half a row leaves the terms unknown.
    const double var = w_ * xx_ - x_ * x_;
    if (var < 0.25 * w_ * w_) return;
    const double b = (w_ * xy_ - x_ * y_) / var;
    if (!(b > 0)) return;  // noise: keep what was known
    per_row_ = b;
    fixed_ = std::max(0.0, (y_ - b * x_) / w_);
    known_ = true;
}

int64_t StepCost::piece(int64_t decode_rows, int64_t prefilling) const {
    if (decode_rows <= 0) return opt_.max_piece;
    if (!known_) return std::clamp(opt_.cold_piece, opt_.min_piece, opt_.max_piece);
    // The prompt rows that keep the step within `stall` x the generation rows' own time.
    const double budget = (opt_.stall - 1) * estimate(decode_rows) / per_row_;
    const double each = budget / double(std::max<int64_t>(1, prefilling));
    if (!(each < double(opt_.max_piece))) return opt_.max_piece;
    return std::clamp(int64_t(each), opt_.min_piece, opt_.max_piece);
}

}  // namespace ds4::server
