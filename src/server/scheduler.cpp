#include "server/scheduler.h"

#include "server/generation.h"

namespace ds4::server {

Scheduler::Scheduler(engine::Engine& engine, Metrics& metrics)
    : engine_(engine), metrics_(metrics), thread_([this] { worker(); }) {}

Scheduler::~Scheduler() { shutdown(); }

bool Scheduler::submit(std::unique_ptr<Job>& job) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_) return false;
        job->enqueued = std::chrono::steady_clock::now();
        queue_.push_back(std::move(job));
        ++metrics_.queue_depth;
    }
    cv_.notify_one();
    return true;
}

void Scheduler::shutdown() {
    {
        std::lock_guard lock(mutex_);
        if (!stopping_) {
            stopping_ = true;
            for (auto& j : queue_) {
                j->channel->shutdown = true;
                j->channel->cancel = true;
            }
            if (running_) {
                running_->shutdown = true;
                running_->cancel = true;
            }
        }
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Scheduler::worker() {
    for (;;) {
        std::unique_ptr<Job> job;
        {
            std::unique_lock lock(mutex_);
            cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping, and the queue is drained
            job = std::move(queue_.front());
            queue_.pop_front();
            --metrics_.queue_depth;
            running_ = job->channel;
            ++metrics_.active;
        }
        try {
            run_job(engine_, *job, metrics_);
        } catch (const std::exception&) {
            job->channel->close(500);  // run_job reports its own errors; this is a last resort
        }
        std::lock_guard lock(mutex_);
        running_.reset();
        --metrics_.active;
    }
}

}  // namespace ds4::server
