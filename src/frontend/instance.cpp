#include "frontend/instance.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "common/error.h"

namespace ds4::frontend {

InstanceLock::~InstanceLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

std::unique_ptr<InstanceLock> InstanceLock::take(const char* tool) {
    const char* path = std::getenv("DS4_LOCK_FILE");
    if (!path || !*path) return nullptr;
    const int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) fail("{}: cannot open the lock file {} (DS4_LOCK_FILE): {}", tool, path, std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char buf[32] = {};
        const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
        ::close(fd);
        const std::string pid = n > 0 ? std::string(buf, size_t(n)) : "unknown";
        fail("another ds4 process is already running (pid {}; lock {}, DS4_LOCK_FILE)",
             pid.substr(0, pid.find_first_of("\n ")), path);
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
        ::close(fd);
        fail("{}: cannot write the lock file {}: {}", tool, path, std::strerror(errno));
    }
    return std::unique_ptr<InstanceLock>(new InstanceLock(fd));
}

uint64_t warm_weights(const gguf::File& f) {
    const long page = ::sysconf(_SC_PAGESIZE);
    const uint64_t step = page > 0 ? uint64_t(page) : 4096;
    volatile uint8_t sink = 0;
    uint64_t bytes = 0;
    for (const gguf::TensorInfo& t : f.tensors()) {
        if (!f.holds(t)) continue;  // left out of a Copy load (another process's layers, streamed experts)
        const uint8_t* p = f.data(t);
        for (uint64_t at = 0; at < t.n_bytes; at += step) sink = sink + p[at];
        if (t.n_bytes) sink = sink + p[t.n_bytes - 1];
        bytes += t.n_bytes;
    }
    (void)sink;
    return bytes;
}

DutyCycle::DutyCycle(int percent) : percent_(percent), since_(std::chrono::steady_clock::now()) {
    if (percent < 1 || percent > 100) fail("--power: {} is not in 1..100", percent);
}

void DutyCycle::step() {
    const auto now = std::chrono::steady_clock::now();
    if (percent_ < 100) {
        const auto work = now - since_;
        std::this_thread::sleep_for(work * (100 - percent_) / percent_);
    }
    since_ = std::chrono::steady_clock::now();
}

}  // namespace ds4::frontend
