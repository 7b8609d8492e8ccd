// Process-level runtime helpers of ds4 and ds4-server (spec/PRODUCT.md §2, §3.5):
//
//   InstanceLock   DS4_LOCK_FILE=PATH: one engine process per lock file. flock() on PATH, the
//                  owner's pid written into it; a second process refuses to start with
//                  "another ds4 process is already running (pid N)". Unlike upstream (always on,
//                  /tmp/ds4.lock) it is opt-in: the test suite and multi-model hosts run several
//                  engines at once, each sized by its own --ctx and memory checks.
//   warm_weights   --warm-weights: reads one byte of every page of the tensors the file holds,
//                  so the first tokens do not wait on page faults.
//   DutyCycle      --power N.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "gguf/reader.h"

namespace ds4::frontend {

class InstanceLock {
public:
    ~InstanceLock();
    InstanceLock(const InstanceLock&) = delete;
    InstanceLock& operator=(const InstanceLock&) = delete;

    // nullptr when DS4_LOCK_FILE is unset or empty; throws ds4::Error when another process
    // holds the lock (naming its pid) or the file cannot be opened.
    static std::unique_ptr<InstanceLock> take(const char* tool);

private:
    explicit InstanceLock(int fd) : fd_(fd) {}
    int fd_;
};

// Touches every page of every tensor's bytes (mapped or copied); returns the bytes touched.
uint64_t warm_weights(const gguf::File& f);

// --power N (1..100): a duty cycle. step() after each unit of work (a token) sleeps so that
// work takes about N% of the wall time: after a step of t seconds, t * (100 - N) / N. The
// output is unchanged; 100 never sleeps.
class DutyCycle {
public:
    explicit DutyCycle(int percent);
    void step();

private:
    int percent_;
    std::chrono::steady_clock::time_point since_;
};

}  // namespace ds4::frontend
