// Comparison of two logits sequences (reference = the oracle, test = our engine or another
// oracle run), position by position, with the distances spec/ORACLE.md talks about.
//
// Logits files are raw little-endian float32 [n_tokens][n_vocab] (what ds4-oracle --out and
// ds4 --dump-logits-f32 write); n_vocab is not stored and must be given.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds4::test {

struct Logits {
    int64_t n_vocab = 0;
    int64_t n_tokens = 0;
    std::vector<float> values;  // [n_tokens][n_vocab]

    const float* row(int64_t pos) const { return values.data() + pos * n_vocab; }
};

// Reads a logits file; throws ds4::Error when it cannot be read or its size is not a
// non-zero multiple of n_vocab * 4 bytes.
Logits load_logits(const std::string& path, int64_t n_vocab);

// Distances at one position (computed in double).
struct PositionStats {
    double max_abs_diff = 0;  // max_v |test[v] - ref[v]|
    double ref_std = 0;       // population standard deviation of ref[v] over v
    double rel_err = 0;       // max_abs_diff / ref_std (inf if ref_std == 0 and the rows differ)
    double kl = 0;            // KL(softmax(ref) || softmax(test)) in nats
    int32_t ref_top1 = 0;     // argmax of ref (the lowest id among equal maxima)
    int32_t test_top1 = 0;    // argmax of test
    bool top1_agree = true;   // ref_top1 == test_top1
};

// Any non-finite value in either row gives max_abs_diff = rel_err = kl = inf and
// top1_agree = false: a NaN never passes a tolerance.
PositionStats compare_position(const float* ref, const float* test, int64_t n_vocab);

struct CompareSummary {
    int64_t n_positions = 0;
    double worst_max_abs_diff = 0;  // max over positions
    double worst_rel_err = 0;
    double worst_kl = 0;
    int64_t worst_rel_err_pos = -1;  // position of worst_rel_err (-1 when n_positions == 0)
    double median_max_abs_diff = 0;  // median over positions (mean of the two middle values
    double median_rel_err = 0;       //  when n_positions is even)
    double median_kl = 0;
    double top1_agreement = 1;        // fraction of positions whose top-1 ids agree
    int64_t first_divergence = -1;    // first position with max_abs_diff > tol * ref_std; -1: none
    double tol = 0;                   // the tol the summary was computed with
    std::vector<PositionStats> positions;
};

// Compares every position; ref and test must have the same n_vocab and n_tokens (else
// ds4::Error). tol is relative to each position's ref_std (spec/ORACLE.md uses 1e-3).
CompareSummary compare_logits(const Logits& ref, const Logits& test, double tol);

// One line for test logs, e.g. "300 positions: worst |d| 2.9e-06 (rel 2.9e-06 at 17), ...".
std::string describe(const CompareSummary& s);

}  // namespace ds4::test
