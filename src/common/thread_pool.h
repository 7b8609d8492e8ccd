// A small persistent thread pool: parallel_for splits [0, n) into contiguous ranges, one per
// thread, and returns when all are done. The calling thread takes the first range, so a pool
// of N threads uses N-1 workers.
//
// Hand-offs spin briefly (~200 us) before sleeping on a condition variable: a decode token
// runs ~100 parallel regions back to back, and waking a sleeping thread costs ~20 us on a VM
// (futex syscalls and the scheduler), so a pool that always slept lost time to
// wake-ups (measured +2.4% decode). Idle pools still sleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ds4 {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }
    // fn(begin, end) over a partition of [0, n); ranges are multiples of `grain` except the last.
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                      int64_t grain = 1);

private:
    void worker(int index);

    int n_threads_;
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable start_cv_, done_cv_;
    // Written by parallel_for before generation_ moves (release), read by workers after.
    const std::function<void(int64_t, int64_t)>* job_ = nullptr;
    int64_t n_ = 0, grain_ = 1;
    std::atomic<uint64_t> generation_{0};  // changes under mu_ (sleepers check it there)
    std::atomic<int> pending_{0};          // workers still running the current job
    std::atomic<int> sleepers_{0};         // workers waiting on start_cv_
    std::atomic<bool> stop_{false};
};

}  // namespace ds4
