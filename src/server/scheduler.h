// One engine, many clients (spec/PRODUCT.md §4.1): jobs wait in a FIFO queue and a single worker
// thread runs them one at a time on the engine. Submitting never blocks on the engine, so the
// HTTP threads keep accepting; the queue depth is reported in /metrics.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "server/job.h"
#include "server/metrics.h"

namespace ds4::server {

class Scheduler {
public:
    Scheduler(engine::Engine& engine, Metrics& metrics);
    ~Scheduler();  // shutdown()

    // Queues `job`; false when the scheduler is shutting down (the job is not taken).
    bool submit(std::unique_ptr<Job>& job);
    // Stops taking jobs, cancels the queued ones and the running one (they finish with
    // "shutdown requested"), and joins the worker.
    void shutdown();

private:
    void worker();

    engine::Engine& engine_;
    Metrics& metrics_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::unique_ptr<Job>> queue_;
    std::shared_ptr<Channel> running_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace ds4::server
