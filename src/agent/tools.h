// The agent's tools (docs/AGENT.md, "Tools"): read, more, write, edit, search, list, bash,
// bash_status, bash_stop. The model calls them by name with a JSON object of arguments in its
// own tool syntax (the chat format parses it); each call gives back one text result, which
// goes into the conversation as the tool's message. A refused or failed call is a result too
// ("error: ..."), never an exception: the model reads it and tries again.
//
// Rules every tool keeps:
//   * paths go through Root (agent/root.h): nothing outside the working directory;
//   * write, edit and bash ask approve() first (the terminal's y/n prompt; --yes says yes);
//   * every output is capped (Limits) and a capped output says so and where to go on;
//   * nothing waits forever: bash runs under a timeout and then becomes a background job,
//     reads stop at their caps, search skips big and binary files.
// edit only changes text the model has seen: the file must have been read (or written) by a
// tool, be unchanged on disk since (size and modification time), and the replaced text must
// lie in lines it was shown.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/root.h"
#include "agent/shell.h"

namespace ds4::agent {

struct Limits {
    int64_t read_lines = 500;           // read's default max_lines
    size_t read_bytes = 64 * 1024;      // one read or more result
    size_t whole_bytes = 256 * 1024;    // read with whole=true
    size_t line_bytes = 4096;           // a longer line is cut
    size_t search_file_bytes = 4 << 20; // search skips bigger files
    int64_t search_results = 200;       // matching lines
    int64_t search_files = 20000;       // files looked at
    int64_t list_entries = 1000;
    size_t bash_bytes = 32 * 1024;      // bash output kept (the end)
    double bash_timeout = 30;           // default timeout_sec
    double bash_timeout_max = 600;
};

struct ToolResult {
    std::string text;
    bool error = false;
};

class Tools {
public:
    // What a tool asks the user: the tool's name and what it wants to do ("write src/a.cpp
    // (120 bytes)", "run: make test"). true: go ahead.
    using Approve = std::function<bool(const std::string& tool, const std::string& what)>;

    Tools(Root root, Approve approve, Limits limits = {});

    // The OpenAI-style "tools" array (JSON text) describing every tool, for the chat format
    // to render in the system prompt.
    static std::string specs_json();

    // Runs one call; `arguments` is the JSON object text. cancel: Ctrl+C ends a waiting bash
    // (the command goes on as a job); on_output: a running command's output as it comes.
    ToolResult call(const std::string& name, const std::string& arguments,
                    const std::atomic<bool>* cancel = nullptr,
                    const std::function<void(std::string_view)>& on_output = {});

    const Root& root() const { return root_; }
    const Limits& limits() const { return limits_; }

private:
    struct Seen {
        int64_t size = -1;
        int64_t mtime_ns = -1;
        std::vector<std::pair<int64_t, int64_t>> lines;  // 1-based inclusive ranges shown
    };
    ToolResult read(const std::string& path, int64_t start, int64_t max_lines, bool whole);
    ToolResult more(int64_t count);
    ToolResult write(const std::string& path, const std::string& content);
    ToolResult edit(const std::string& path, const std::string& old_text, const std::string& new_text);
    ToolResult search(const std::string& pattern, const std::string& path, int64_t max_results);
    ToolResult list(const std::string& path, int depth);
    ToolResult bash(const std::string& command, double timeout, const std::atomic<bool>* cancel,
                    const std::function<void(std::string_view)>& on_output);
    std::string job_text(const JobReport& r, const std::string& what) const;
    void mark_seen(const std::string& abs, int64_t first, int64_t last);
    void restat(const std::string& abs);

    Root root_;
    Approve approve_;
    Limits limits_;
    Jobs jobs_;
    std::map<std::string, Seen> seen_;  // by canonical path
    // Where the last read stopped (for more).
    std::string more_path_;
    int64_t more_line_ = 0;
    bool more_whole_ = false;
};

}  // namespace ds4::agent
