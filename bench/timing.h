// Timing helper shared by the micro-benchmarks in bench/.
#pragma once

#include <algorithm>
#include <chrono>

namespace ds4::bench {

// The fastest of `reps` runs of f(), in seconds: on a shared machine the minimum is the
// figure least disturbed by other work.
template <class F>
double best_seconds(int reps, F&& f) {
    double best = 1e30;
    for (int rep = 0; rep < reps; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

}  // namespace ds4::bench
