// Child processes for tests that run several binaries at once (the pipeline tests): a process
// with stdout and stderr in files, killed when its handle goes; reading those files; waiting
// for a condition with a time limit.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"

namespace ds4::test {

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

inline std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A child process (argv[0] is a path, no PATH search) with stdout and stderr in files (stdin
// from file `in` when given); killed (SIGKILL) when destroyed.
class Proc {
public:
    Proc(const std::vector<std::string>& argv, const std::string& out, const std::string& err,
         const std::string& in = {})
        : out_(out), err_(err) {
        // Emptied before the child starts: a file of an earlier process by the same name must
        // not be read as this one's.
        for (const auto& f : {out, err}) ::close(::open(f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
        pid_ = fork();
        if (pid_ < 0) fail("fork failed");
        if (pid_ == 0) {
            const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(o, 1);
            dup2(e, 2);
            if (!in.empty()) {
                const int i = open(in.c_str(), O_RDONLY);
                if (i < 0) _exit(126);
                dup2(i, 0);
            }
            std::vector<char*> a;
            for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
            a.push_back(nullptr);
            execv(a[0], a.data());
            _exit(127);
        }
    }
    ~Proc() { kill(SIGKILL); }
    Proc(const Proc&) = delete;
    Proc& operator=(const Proc&) = delete;

    void kill(int sig) {
        if (pid_ <= 0) return;
        ::kill(pid_, sig);
        if (sig == SIGKILL) {
            int st;
            waitpid(pid_, &st, 0);
            pid_ = -1;
        }
    }
    // The exit code, or -1 when it did not exit by itself within timeout_s (then it is killed).
    int wait(double timeout_s) {
        using namespace std::chrono_literals;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        while (pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
            int st;
            if (waitpid(pid_, &st, WNOHANG) == pid_) {
                pid_ = -1;
                return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
            }
            std::this_thread::sleep_for(10ms);
        }
        kill(SIGKILL);
        return -1;
    }
    bool running() {
        int st;
        if (pid_ > 0 && waitpid(pid_, &st, WNOHANG) == pid_) pid_ = -1;
        return pid_ > 0;
    }
    pid_t pid() const { return pid_; }
    std::string out() const { return slurp(out_); }
    std::string err() const { return slurp(err_); }

private:
    pid_t pid_ = -1;
    std::string out_, err_;
};

// Waits until `pred()` or timeout_s.
template <class P>
bool eventually(P pred, double timeout_s) {
    using namespace std::chrono_literals;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
        if (pred()) return true;
        std::this_thread::sleep_for(20ms);
    }
    return pred();
}

// The single-process reference of the pipeline tests: `ds4 -m model -t 1 --token-ids ids
// --dump-logits-f32 BASE.f32 -n 8 --prefill-chunk chunk` (logits of every position, then 8
// greedy ids; its output in BASE.out / BASE.err); returns its stdout (the ids' text). Throws
// ds4::Error when it fails. `ds4` is the binary's path.
inline std::string one_process_reference(const std::string& ds4, const std::string& model, const std::string& ids,
                                         const std::string& base, const std::string& prefill_chunk) {
    Proc p({ds4, "-m", model, "-t", "1", "--token-ids", ids, "--dump-logits-f32", base + ".f32", "-n", "8",
            "--prefill-chunk", prefill_chunk},
           base + ".out", base + ".err");
    if (p.wait(60) != 0) fail("the one-process reference failed: {}", p.err());
    return p.out();
}

}  // namespace ds4::test
