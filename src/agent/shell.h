// The agent's `bash` tool underneath: commands run by /bin/bash -c in the root directory, in a
// process group of their own, stdin from /dev/null, stdout and stderr together into a pipe
// that a reader thread drains. A command that outlives its timeout is not killed: it becomes
// a background job the model can look at (status: the output since its last look) or stop
// (the whole group killed). Output is capped: a job keeps its last `cap` bytes and counts the
// rest. Destroying Jobs kills every job still running, so nothing outlives the agent.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace ds4::agent {

struct JobReport {
    int id = 0;
    bool finished = false;
    int exit_code = -1;        // when finished: the status, 128 + signal when killed
    std::string output;        // what is new since the last report, at most `cap` bytes (the end)
    uint64_t dropped = 0;      // bytes of new output not kept (the cap)
    double seconds = 0;        // since the start
};

class Jobs {
public:
    Jobs(std::string cwd, size_t cap = 64 * 1024);
    ~Jobs();
    Jobs(const Jobs&) = delete;
    Jobs& operator=(const Jobs&) = delete;

    // Starts `command` and waits until it ends, `timeout_sec` pass or *cancel turns true;
    // on_output sees each new piece of output while it waits. The report says whether it
    // finished; if not, it goes on as job report.id. Throws ds4::Error when it cannot start.
    JobReport run(const std::string& command, double timeout_sec, const std::atomic<bool>* cancel = nullptr,
                  const std::function<void(std::string_view)>& on_output = {});
    // Job `id`'s state and new output (a finished job is forgotten after it is reported).
    // Throws ds4::Error for an unknown id.
    JobReport status(int id);
    // Kills job `id`'s process group and reports its last output.
    JobReport stop(int id);
    size_t running() const;

private:
    struct Job;
    JobReport report(Job& j);
    std::string cwd_;
    size_t cap_;
    int next_id_ = 1;
    std::map<int, std::unique_ptr<Job>> jobs_;
};

}  // namespace ds4::agent
