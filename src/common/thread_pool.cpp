#include "common/thread_pool.h"

#include <algorithm>

namespace ds4 {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    start_cv_.notify_all();
    for (auto& t : workers_) t.join();
}

namespace {
// Range of part `index` of `parts` over [0, n) in units of `grain`.
std::pair<int64_t, int64_t> part(int64_t n, int64_t grain, int parts, int index) {
    const int64_t units = (n + grain - 1) / grain;
    const int64_t b = units * index / parts, e = units * (index + 1) / parts;
    return {std::min(n, b * grain), std::min(n, e * grain)};
}
}  // namespace

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    if (n_threads_ == 1 || n <= grain) {
        fn(0, n);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        job_ = &fn;
        n_ = n;
        grain_ = grain;
        pending_ = n_threads_ - 1;
        ++generation_;
    }
    start_cv_.notify_all();
    auto [b, e] = part(n, grain, n_threads_, 0);
    if (b < e) fn(b, e);
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
}

void ThreadPool::worker(int index) {
    uint64_t seen = 0;
    for (;;) {
        const std::function<void(int64_t, int64_t)>* job;
        int64_t n, grain;
        {
            std::unique_lock<std::mutex> lock(mu_);
            start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            job = job_;
            n = n_;
            grain = grain_;
        }
        auto [b, e] = part(n, grain, n_threads_, index);
        if (b < e) (*job)(b, e);
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (--pending_ == 0) done_cv_.notify_one();
        }
    }
}

}  // namespace ds4
