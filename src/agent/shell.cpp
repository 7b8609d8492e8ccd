#include "agent/shell.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/error.h"

namespace ds4::agent {

using Clock = std::chrono::steady_clock;

struct Jobs::Job {
    pid_t pid = -1;
    int fd = -1;
    Clock::time_point start = Clock::now();
    std::mutex m;
    std::condition_variable cv;
    std::string out;        // new output since the last report (the last `cap` bytes)
    uint64_t dropped = 0;
    bool done = false;
    int exit_code = -1;
    std::thread reader;
    std::function<void(std::string_view)> on_output;  // under m

    void kill_group() {
        if (pid > 0) ::kill(-pid, SIGKILL);
    }
};

Jobs::Jobs(std::string cwd, size_t cap) : cwd_(std::move(cwd)), cap_(cap) {}

Jobs::~Jobs() {
    for (auto& [id, j] : jobs_) j->kill_group();
    for (auto& [id, j] : jobs_)
        if (j->reader.joinable()) j->reader.join();
}

size_t Jobs::running() const {
    size_t n = 0;
    for (const auto& [id, j] : jobs_) {
        std::lock_guard l(j->m);
        n += !j->done;
    }
    return n;
}

namespace {

// Reads the pipe until the command exits (then whatever its leftovers write within a moment:
// a process it left in the background may hold the pipe open forever).
void drain(int fd, pid_t pid, size_t cap, std::mutex& m, std::condition_variable& cv,
           std::string& out, uint64_t& dropped, bool& done, int& exit_code,
           std::function<void(std::string_view)>& on_output) {
    char buf[16384];
    bool exited = false;
    int status = 0;
    Clock::time_point exited_at{};
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        const int r = ::poll(&p, 1, 50);
        if (r > 0) {
            const ssize_t n = ::read(fd, buf, sizeof buf);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
            if (n > 0) {
                std::lock_guard l(m);
                out.append(buf, size_t(n));
                if (out.size() > 2 * cap) {
                    const size_t cut = out.size() - cap;
                    dropped += cut;
                    out.erase(0, cut);
                }
                if (on_output) on_output(std::string_view(buf, size_t(n)));
            }
        }
        if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) {
            exited = true;
            exited_at = Clock::now();
        }
        if (exited && Clock::now() - exited_at > std::chrono::milliseconds(200)) break;
    }
    if (!exited) ::waitpid(pid, &status, 0);
    ::close(fd);
    std::lock_guard l(m);
    exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    done = true;
    cv.notify_all();
}

}  // namespace

JobReport Jobs::report(Job& j) {
    std::lock_guard l(j.m);
    JobReport r;
    r.finished = j.done;
    r.exit_code = j.exit_code;
    if (j.out.size() > cap_) {
        j.dropped += j.out.size() - cap_;
        j.out.erase(0, j.out.size() - cap_);
    }
    r.output = std::move(j.out);
    j.out.clear();
    r.dropped = j.dropped;
    j.dropped = 0;
    r.seconds = std::chrono::duration<double>(Clock::now() - j.start).count();
    return r;
}

JobReport Jobs::run(const std::string& command, double timeout_sec, const std::atomic<bool>* cancel,
                    const std::function<void(std::string_view)>& on_output) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) fail("bash: pipe: {}", std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        fail("bash: fork: {}", std::strerror(errno));
    }
    if (pid == 0) {
        ::setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        const int null = ::open("/dev/null", O_RDONLY);
        if (null >= 0) ::dup2(null, 0);
        ::dup2(fds[1], 1);
        ::dup2(fds[1], 2);
        if (::chdir(cwd_.c_str()) != 0) _exit(126);
        ::execl("/bin/bash", "bash", "-c", command.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    ::setpgid(pid, pid);  // both sides, so a kill right after fork reaches the group
    ::close(fds[1]);
    auto job = std::make_unique<Job>();
    Job& j = *job;
    j.pid = pid;
    j.fd = fds[0];
    j.on_output = on_output;
    j.reader = std::thread([this, &j] {
        drain(j.fd, j.pid, cap_, j.m, j.cv, j.out, j.dropped, j.done, j.exit_code, j.on_output);
    });
    const int id = next_id_++;
    jobs_[id] = std::move(job);

    const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(std::max(0.0, timeout_sec)));
    {
        std::unique_lock l(j.m);
        while (!j.done && Clock::now() < end && !(cancel && cancel->load()))
            j.cv.wait_for(l, std::chrono::milliseconds(50));
        j.on_output = nullptr;  // the caller's callback does not outlive this call
    }
    JobReport r = report(j);
    r.id = id;
    if (r.finished) {
        if (j.reader.joinable()) j.reader.join();
        jobs_.erase(id);
    }
    return r;
}

JobReport Jobs::status(int id) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) fail("no job {} (finished jobs are forgotten once reported)", id);
    JobReport r = report(*it->second);
    r.id = id;
    if (r.finished) {
        if (it->second->reader.joinable()) it->second->reader.join();
        jobs_.erase(it);
    }
    return r;
}

JobReport Jobs::stop(int id) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) fail("no job {} (finished jobs are forgotten once reported)", id);
    Job& j = *it->second;
    j.kill_group();
    {
        std::unique_lock l(j.m);
        j.cv.wait_for(l, std::chrono::seconds(5), [&] { return j.done; });
    }
    JobReport r = report(j);
    r.id = id;
    if (r.finished) {
        if (j.reader.joinable()) j.reader.join();
        jobs_.erase(it);
    }
    return r;
}

}  // namespace ds4::agent
