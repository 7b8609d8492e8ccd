// The hand-off between the engine worker and one HTTP connection: the worker appends bytes
// (SSE records, or the final body) and never touches a socket; the connection thread drains
// them at the client's pace. A slow or vanished client therefore costs only its own buffer,
// and a vanished one sets `cancel`, which the worker checks between tokens.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

namespace ds4::server {

class Channel {
public:
    // Worker side.
    void push(std::string bytes) {
        if (bytes.empty()) return;
        {
            std::lock_guard lock(mutex_);
            buf_ += bytes;
        }
        cv_.notify_all();
    }
    // The response is complete; `status` is the HTTP status of a non-streaming answer.
    void close(int status = 200) {
        {
            std::lock_guard lock(mutex_);
            closed_ = true;
            status_ = status;
        }
        cv_.notify_all();
    }

    // Connection side: waits up to `wait` for bytes; moves them to `out`. Returns false once
    // the channel is closed and drained.
    bool pop(std::string& out, std::chrono::milliseconds wait) {
        std::unique_lock lock(mutex_);
        cv_.wait_for(lock, wait, [&] { return !buf_.empty() || closed_; });
        out.swap(buf_);
        buf_.clear();
        return !(closed_ && out.empty());
    }
    // Waits up to `wait` for close(); once closed, moves everything pushed to `body`, the
    // status to `status` and returns true.
    bool wait_all_for(std::string& body, int& status, std::chrono::milliseconds wait) {
        std::unique_lock lock(mutex_);
        if (!cv_.wait_for(lock, wait, [&] { return closed_; })) return false;
        status = status_;
        body = std::move(buf_);
        return true;
    }
    bool closed() const {
        std::lock_guard lock(mutex_);
        return closed_;
    }

    std::atomic<bool> cancel{false};      // the client is gone (or the server stops)
    std::atomic<bool> shutdown{false};    // cancel came from shutdown, not from the client
    std::atomic<bool> timed_out{false};   // cancel came from --request-timeout

    // Why the job was cancelled, as reported to the client, and the HTTP status for a
    // non-streaming answer that has to say it in its status.
    std::string cancel_reason() const {
        if (shutdown) return "shutdown requested";
        if (timed_out) return "request timeout (--request-timeout)";
        return "client gone";
    }
    int cancel_status() const { return shutdown ? 503 : timed_out ? 504 : 500; }

private:
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::string buf_;
    bool closed_ = false;
    int status_ = 200;
};

}  // namespace ds4::server
