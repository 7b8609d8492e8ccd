#include "support/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "common/error.h"

namespace ds4::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int32_t argmax(const float* v, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i) {
        if (v[i] > v[best]) best = i;
    }
    return static_cast<int32_t>(best);
}

// log(sum(exp(v))), shifted by the maximum so it cannot overflow.
double log_sum_exp(const float* v, int64_t n) {
    double m = v[0];
    for (int64_t i = 1; i < n; ++i) m = std::max(m, static_cast<double>(v[i]));
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(v[i] - m);
    return m + std::log(s);
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

}  // namespace

Logits load_logits(const std::string& path, int64_t n_vocab) {
    if (n_vocab <= 0) fail("{}: n_vocab must be positive, got {}", path, n_vocab);
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) fail("{}: cannot open logits file: {}", path, std::strerror(errno));
    if (std::fseek(f.get(), 0, SEEK_END) != 0) fail("{}: cannot seek", path);
    const long size = std::ftell(f.get());
    if (size < 0) fail("{}: cannot tell the size", path);
    const int64_t row_bytes = n_vocab * static_cast<int64_t>(sizeof(float));
    if (size == 0 || size % row_bytes != 0) {
        fail("{}: {} bytes is not a non-zero multiple of n_vocab {} x 4 bytes", path, size, n_vocab);
    }
    Logits l;
    l.n_vocab = n_vocab;
    l.n_tokens = size / row_bytes;
    l.values.resize(static_cast<size_t>(l.n_tokens * n_vocab));
    std::rewind(f.get());
    if (std::fread(l.values.data(), sizeof(float), l.values.size(), f.get()) != l.values.size()) {
        fail("{}: short read of {} bytes", path, size);
    }
    return l;
}

PositionStats compare_position(const float* ref, const float* test, int64_t n_vocab) {
    PositionStats s;
    s.ref_top1 = argmax(ref, n_vocab);
    s.test_top1 = argmax(test, n_vocab);
    s.top1_agree = s.ref_top1 == s.test_top1;

    bool finite = true;
    double sum = 0;
    for (int64_t i = 0; i < n_vocab; ++i) {
        finite = finite && std::isfinite(ref[i]) && std::isfinite(test[i]);
        sum += ref[i];
        s.max_abs_diff = std::max(s.max_abs_diff, std::fabs(static_cast<double>(test[i]) - ref[i]));
    }
    const double mean = sum / static_cast<double>(n_vocab);
    double var = 0;
    for (int64_t i = 0; i < n_vocab; ++i) var += (ref[i] - mean) * (ref[i] - mean);
    s.ref_std = std::sqrt(var / static_cast<double>(n_vocab));

    if (!finite) {
        s.max_abs_diff = s.rel_err = s.kl = kInf;
        s.top1_agree = false;
        return s;
    }
    s.rel_err = s.ref_std > 0 ? s.max_abs_diff / s.ref_std : (s.max_abs_diff > 0 ? kInf : 0.0);

    const double lse_ref = log_sum_exp(ref, n_vocab);
    const double lse_test = log_sum_exp(test, n_vocab);
    double kl = 0;
    for (int64_t i = 0; i < n_vocab; ++i) {
        const double log_p = ref[i] - lse_ref;
        const double log_q = test[i] - lse_test;
        kl += std::exp(log_p) * (log_p - log_q);
    }
    s.kl = std::max(0.0, kl);  // >= 0 in exact arithmetic; rounding can leave -1e-17
    return s;
}

CompareSummary compare_logits(const Logits& ref, const Logits& test, double tol) {
    if (ref.n_vocab != test.n_vocab || ref.n_tokens != test.n_tokens) {
        fail("logits shapes differ: reference [{}][{}], test [{}][{}]", ref.n_tokens, ref.n_vocab,
             test.n_tokens, test.n_vocab);
    }
    CompareSummary s;
    s.n_positions = ref.n_tokens;
    s.tol = tol;
    std::vector<double> d, rel, kl;
    int64_t agree = 0;
    for (int64_t p = 0; p < ref.n_tokens; ++p) {
        const PositionStats ps = compare_position(ref.row(p), test.row(p), ref.n_vocab);
        if (s.first_divergence < 0 && !(ps.max_abs_diff <= tol * ps.ref_std)) s.first_divergence = p;
        if (s.worst_rel_err_pos < 0 || ps.rel_err > s.worst_rel_err) {
            s.worst_rel_err = ps.rel_err;
            s.worst_rel_err_pos = p;
        }
        s.worst_max_abs_diff = std::max(s.worst_max_abs_diff, ps.max_abs_diff);
        s.worst_kl = std::max(s.worst_kl, ps.kl);
        agree += ps.top1_agree ? 1 : 0;
        d.push_back(ps.max_abs_diff);
        rel.push_back(ps.rel_err);
        kl.push_back(ps.kl);
        s.positions.push_back(ps);
    }
    s.median_max_abs_diff = median(d);
    s.median_rel_err = median(rel);
    s.median_kl = median(kl);
    s.top1_agreement = s.n_positions ? static_cast<double>(agree) / static_cast<double>(s.n_positions) : 1.0;
    return s;
}

std::string describe(const CompareSummary& s) {
    return fmt::format(
        "{} positions: worst |d| {:.3g}, worst rel {:.3g} (at {}), median rel {:.3g}, worst KL {:.3g}, "
        "median KL {:.3g}, top-1 agreement {:.1f}%, first divergence (> {:.3g} x std) {}",
        s.n_positions, s.worst_max_abs_diff, s.worst_rel_err, s.worst_rel_err_pos, s.median_rel_err, s.worst_kl,
        s.median_kl, 100.0 * s.top1_agreement, s.tol,
        s.first_divergence < 0 ? std::string("none") : std::to_string(s.first_divergence));
}

}  // namespace ds4::test
