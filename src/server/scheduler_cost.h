// The batch loop's cost model (docs/SERVER.md, "Scheduler"): how many prompt rows a step may
// carry beside the generation rows. A step's time is modelled as fixed + per_row x rows (the
// weights are read once per step whatever its rows, each row adds its products), fitted online
// by least squares over the recent steps (older ones weigh less, so a machine that slows down
// or speeds up is followed within some tens of steps).
//
// A step that carries generation rows may add prompt rows until its estimated time reaches
// `stall` times the estimate of the generation rows alone: the streams being generated wait at
// most that factor per token while prompts are read (bounded decode latency), and a prompt
// joins in as few steps as that bound allows (the batch fills up again soon). The budget is
// shared evenly by the slots reading a prompt, each piece within [min_piece, max_piece].
// Until the fit knows both terms (it needs steps of different sizes), pieces are `cold_piece`.
#pragma once

#include <cstdint>

namespace ds4::server {

class StepCost {
public:
    struct Options {
        double stall = 4.0;         // a mixed step's estimated time <= stall x the generation rows' alone
        int64_t min_piece = 16;     // the smallest prompt piece (a prompt always moves)
        int64_t max_piece = 4096;   // the largest (the prefill chunk)
        int64_t cold_piece = 128;   // before the fit knows the costs
    };
    explicit StepCost(Options o);

    // A step of `rows` rows took `seconds`.
    void observe(int64_t rows, double seconds);
    // Whether both terms are known (steps of at least two sizes were seen).
    bool known() const { return known_; }
    double fixed_seconds() const { return fixed_; }
    double row_seconds() const { return per_row_; }
    // Estimated seconds of a step of `rows` rows (0 until known()).
    double estimate(int64_t rows) const { return known_ ? fixed_ + per_row_ * double(rows) : 0.0; }
    // The prompt tokens each of `prefilling` slots may evaluate in a step that also holds
    // `decode_rows` generation rows (decode_rows 0: max_piece, nobody waits).
    int64_t piece(int64_t decode_rows, int64_t prefilling) const;

private:
    void fit();

    Options opt_;
    // Exponentially weighted sums over the steps: weight, rows, rows^2, seconds, rows x seconds.
    double w_ = 0, x_ = 0, xx_ = 0, y_ = 0, xy_ = 0;
    double fixed_ = 0, per_row_ = 0;
    bool known_ = false;
};

}  // namespace ds4::server
