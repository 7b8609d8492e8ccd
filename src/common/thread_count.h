// The rule every tool's --threads follows (ds4, ds4-server, ds4-bench, ds4-gguf-gen and the
// benchmarks): 0 means all hardware threads; an explicit count may be 1 to max_threads().
// Without a cap, a mistyped count starts that many threads (-t 20000 did; -t 100000 kept
// ds4-server from ever listening), and beyond a few per core they only add contention.
#pragma once

#include <cstdint>
#include <string>

namespace ds4 {

// std::thread::hardware_concurrency(), at least 1.
int hardware_threads();
// The largest explicit thread count: 4 x hardware_threads().
int max_threads();
// Empty when `requested` is allowed, else the rule in plain numbers, e.g. "must be 0 (all 16
// hardware threads) or 1 to 64 (4 x the hardware threads), got 20000".
std::string thread_count_error(int64_t requested);
// The number of threads to run: hardware_threads() for 0, else `requested`. Throws ds4::Error
// "<flag>: <thread_count_error>" when the count breaks the rule.
int resolve_threads(int64_t requested, const char* flag = "--threads");

}  // namespace ds4
