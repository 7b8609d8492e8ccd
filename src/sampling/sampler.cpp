#include "sampling/sampler.h"

#include "common/error.h"

#include <algorithm>
#include <cmath>

namespace ds4::sampling {

const char* temperature_error(double v) {
    return std::isfinite(v) && v >= 0 ? nullptr : "must be a finite number >= 0";
}
const char* top_p_error(double v) { return v >= 0 && v <= 1 ? nullptr : "must be in [0, 1]"; }
const char* min_p_error(double v) { return v >= 0 && v <= 1 ? nullptr : "must be in [0, 1]"; }
const char* top_k_error(int64_t v) { return v >= 0 ? nullptr : "must be >= 0"; }

int32_t argmax(std::span<const float> logits) {
    int32_t best = -1;
    for (size_t i = 0; i < logits.size(); ++i) {
        if (std::isnan(logits[i])) continue;
        if (best < 0 || logits[i] > logits[size_t(best)]) best = int32_t(i);
    }
    if (best < 0) fail("sampling: no usable logit among {} (empty or all NaN)", logits.size());
    return best;
}

Sampler::Sampler(SamplerParams params) : params_(params), rng_(params.seed) {}

std::vector<Candidate> Sampler::candidates(std::span<const float> logits) const {
    const int32_t top = argmax(logits);
    const float t = params_.temperature;
    if (t <= 0) return {{top, 1.0f}};
    const double max_logit = double(logits[size_t(top)]) / t;
    if (std::isinf(max_logit)) {
        // +inf dominates everything: it is certain (avoids inf - inf below).
        if (max_logit > 0) return {{top, 1.0f}};
    }

    // min-p as a logit threshold: p_i / p_max >= min_p  <=>  l_i/T - l_max/T >= ln(min_p).
    // It runs before sorting because it usually removes almost the whole vocabulary.
    const double floor = params_.min_p > 0 ? max_logit + std::log(double(params_.min_p)) : -INFINITY;
    struct Scored {
        int32_t id;
        double logit;
    };
    std::vector<Scored> kept;
    for (size_t i = 0; i < logits.size(); ++i) {
        if (std::isnan(logits[i])) continue;
        const double l = double(logits[i]) / t;
        if (l >= floor && l > -INFINITY) kept.push_back({int32_t(i), l});
    }
    if (kept.empty()) kept.push_back({top, max_logit});
    auto better = [](const Scored& a, const Scored& b) {
        return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
    };
    if (params_.top_k > 0 && size_t(params_.top_k) < kept.size()) {
        std::nth_element(kept.begin(), kept.begin() + params_.top_k, kept.end(), better);
        kept.resize(size_t(params_.top_k));
    }
    std::sort(kept.begin(), kept.end(), better);

    // Softmax over the survivors. min-p is relative to the top token, which always survives,
    // so normalising over the kept set does not change any ratio it tested.
    std::vector<double> p(kept.size());
    double sum = 0;
    for (size_t i = 0; i < kept.size(); ++i) sum += p[i] = std::exp(kept[i].logit - max_logit);
    size_t n = kept.size();
    if (params_.top_p < 1.0f) {
        double mass = 0;
        for (size_t i = 0; i < kept.size(); ++i) {
            mass += p[i] / sum;
            if (mass >= double(params_.top_p)) {
                n = i + 1;
                break;
            }
        }
    }
    double kept_sum = 0;
    for (size_t i = 0; i < n; ++i) kept_sum += p[i];
    std::vector<Candidate> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = {kept[i].id, float(p[i] / kept_sum)};
    return out;
}

int32_t Sampler::sample(std::span<const float> logits) {
    if (params_.temperature <= 0) return argmax(logits);
    return draw(candidates(logits));
}

int32_t Sampler::draw(std::span<const Candidate> c) {
    if (c.empty()) fail("sampling: nothing to draw from");
    const double u = rng_.uniform();
    double acc = 0;
    for (const auto& cand : c) {
        acc += cand.p;
        if (u < acc) return cand.id;
    }
    return c.back().id;  // rounding left u above the float sum
}

}  // namespace ds4::sampling
