#include "agent/tools.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/text_file.h"
#include "common/error.h"
#include "common/file_io.h"

namespace ds4::agent {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Argument readers: a missing required argument or one of the wrong type is an Error whose
// message the model reads.
std::string str_arg(const json& a, const char* key, const char* fallback = nullptr) {
    if (!a.contains(key) || a[key].is_null()) {
        if (fallback) return fallback;
        fail("missing argument \"{}\"", key);
    }
    if (a[key].is_string()) return a[key].get<std::string>();
    if (a[key].is_number() || a[key].is_boolean()) return a[key].dump();
    fail("argument \"{}\" must be a string", key);
}

int64_t int_arg(const json& a, const char* key, int64_t fallback) {
    if (!a.contains(key) || a[key].is_null()) return fallback;
    if (a[key].is_number_integer()) return a[key].get<int64_t>();
    if (a[key].is_number()) return int64_t(a[key].get<double>());
    if (a[key].is_string()) {
        try {
            return std::stoll(a[key].get<std::string>());
        } catch (...) {
        }
    }
    fail("argument \"{}\" must be an integer", key);
}

bool bool_arg(const json& a, const char* key) {
    if (!a.contains(key) || a[key].is_null()) return false;
    if (a[key].is_boolean()) return a[key].get<bool>();
    if (a[key].is_string()) return a[key] == "true" || a[key] == "1";
    if (a[key].is_number()) return a[key].get<double>() != 0;
    fail("argument \"{}\" must be true or false", key);
}

ToolResult error(const std::string& why) { return {"error: " + why, true}; }

std::string cap_note(size_t cap) { return fmt::format("[output capped at {} bytes]", cap); }

json tool(const char* name, const char* description, json properties, std::vector<std::string> required) {
    return {{"type", "function"},
            {"function",
             {{"name", name},
              {"description", description},
              {"parameters", {{"type", "object"}, {"properties", std::move(properties)}, {"required", required}}}}}};
}

json prop(const char* type, const char* description) { return {{"type", type}, {"description", description}}; }

}  // namespace

Tools::Tools(Root root, Approve approve, Limits limits)
    : root_(std::move(root)), approve_(std::move(approve)), limits_(limits), jobs_(root_.path(), limits.bash_bytes) {}

std::string Tools::specs_json() {
    json t = json::array();
    t.push_back(tool("read",
                     "Read a text file, with line numbers: the first 500 lines unless start_line / "
                     "max_lines say otherwise, or the whole file with whole=true (up to 256 KB). The "
                     "result says where to continue.",
                     {{"path", prop("string", "File path, relative to the working directory")},
                      {"start_line", prop("integer", "First line to show (1-based, default 1)")},
                      {"max_lines", prop("integer", "Lines to show (default 500)")},
                      {"whole", prop("boolean", "Show the whole file")}},
                     {"path"}));
    t.push_back(tool("more", "Continue the last read where it stopped.",
                     {{"count", prop("integer", "Lines to show (default 500)")}}, {}));
    t.push_back(tool("write", "Create or replace a file with the given content (asks the user).",
                     {{"path", prop("string", "File path")}, {"content", prop("string", "The whole new content")}},
                     {"path", "content"}));
    t.push_back(tool("edit",
                     "Replace the exact text old with new in a file you have read (old must occur "
                     "once, in lines you were shown; asks the user).",
                     {{"path", prop("string", "File path")},
                      {"old", prop("string", "Exact text to replace, with enough context to be unique")},
                      {"new", prop("string", "Replacement text")}},
                     {"path", "old", "new"}));
    t.push_back(tool("search", "Search files under a path for a regular expression (PCRE); gives file:line: text.",
                     {{"pattern", prop("string", "Regular expression")},
                      {"path", prop("string", "Directory or file (default: the working directory)")},
                      {"max_results", prop("integer", "Most matching lines (default 200)")}},
                     {"pattern"}));
    t.push_back(tool("list", "List a directory: names, sizes, / after directories.",
                     {{"path", prop("string", "Directory (default: the working directory)")},
                      {"depth", prop("integer", "Levels to descend (1-3, default 1)")}},
                     {}));
    t.push_back(tool("bash",
                     "Run a shell command in the working directory (asks the user). After "
                     "timeout_sec (default 30) it keeps running as a background job: see bash_status "
                     "and bash_stop.",
                     {{"command", prop("string", "The command, run by bash -c")},
                      {"timeout_sec", prop("number", "Seconds to wait for it (default 30, at most 600)")}},
                     {"command"}));
    t.push_back(tool("bash_status", "New output of a background job, and whether it has finished.",
                     {{"id", prop("integer", "The job id")}}, {"id"}));
    t.push_back(tool("bash_stop", "Stop a background job (kills its processes).",
                     {{"id", prop("integer", "The job id")}}, {"id"}));
    return t.dump();
}

ToolResult Tools::call(const std::string& name, const std::string& arguments, const std::atomic<bool>* cancel,
                       const std::function<void(std::string_view)>& on_output) {
    json a = json::parse(arguments.empty() ? "{}" : arguments, nullptr, false);
    if (a.is_discarded() || !a.is_object()) return error("the arguments of " + name + " are not a JSON object");
    try {
        if (name == "read")
            return read(str_arg(a, "path"), int_arg(a, "start_line", 1), int_arg(a, "max_lines", limits_.read_lines),
                        bool_arg(a, "whole"));
        if (name == "more") return more(int_arg(a, "count", limits_.read_lines));
        if (name == "write") return write(str_arg(a, "path"), str_arg(a, "content"));
        if (name == "edit") return edit(str_arg(a, "path"), str_arg(a, "old"), str_arg(a, "new"));
        if (name == "search")
            return search(str_arg(a, "pattern"), str_arg(a, "path", "."),
                          int_arg(a, "max_results", limits_.search_results));
        if (name == "list") return list(str_arg(a, "path", "."), int(int_arg(a, "depth", 1)));
        if (name == "bash") {
            double timeout = limits_.bash_timeout;
            if (a.contains("timeout_sec") && a["timeout_sec"].is_number()) timeout = a["timeout_sec"].get<double>();
            else if (a.contains("timeout_sec")) timeout = double(int_arg(a, "timeout_sec", 30));
            return bash(str_arg(a, "command"), timeout, cancel, on_output);
        }
        if (name == "bash_status") return {job_text(jobs_.status(int(int_arg(a, "id", 0))), "job"), false};
        if (name == "bash_stop") {
            const JobReport r = jobs_.stop(int(int_arg(a, "id", 0)));
            return {job_text(r, "stopped job " + std::to_string(r.id)), false};
        }
    } catch (const Error& e) {
        return error(e.what());
    }
    return error("no tool named \"" + name + "\" (tools: read, more, write, edit, search, list, bash, "
                 "bash_status, bash_stop)");
}

void Tools::restat(const std::string& abs) {
    struct stat st {};
    Seen& s = seen_[abs];
    if (::stat(abs.c_str(), &st) != 0) {
        s = {};
        return;
    }
    s.size = int64_t(st.st_size);
    s.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

void Tools::mark_seen(const std::string& abs, int64_t first, int64_t last) {
    if (last < first) return;
    auto& v = seen_[abs].lines;
    v.emplace_back(first, last);
    std::sort(v.begin(), v.end());
    std::vector<std::pair<int64_t, int64_t>> merged;
    for (const auto& r : v) {
        if (!merged.empty() && r.first <= merged.back().second + 1)
            merged.back().second = std::max(merged.back().second, r.second);
        else
            merged.push_back(r);
    }
    v = std::move(merged);
}

ToolResult Tools::read(const std::string& path, int64_t start, int64_t max_lines, bool whole) {
    const std::string abs = root_.resolve(path);
    if (start < 1) start = 1;
    if (max_lines < 1) max_lines = 1;
    const size_t cap = whole ? limits_.whole_bytes : limits_.read_bytes;
    if (whole) max_lines = INT64_MAX;
    const LinesRead r = read_lines(abs, start, max_lines, cap, limits_.line_bytes);
    // Lines shown of an earlier version of the file say nothing about this one.
    const Seen was = seen_[abs];
    restat(abs);
    if (was.size != seen_[abs].size || was.mtime_ns != seen_[abs].mtime_ns) seen_[abs].lines.clear();
    mark_seen(abs, start, r.last);
    const std::string rel = root_.relative(abs);
    std::string out = rel + ": ";
    if (r.binary) return error(rel + " looks binary (a NUL byte in its first 8 KB): not shown");
    if (r.last < start) {
        more_path_.clear();
        return {rel + ": no lines from line " + std::to_string(start) + " (the file has " +
                    std::to_string(r.last) + ")",
                false};
    }
    out += "lines " + std::to_string(start) + "-" + std::to_string(r.last);
    out += r.at_eof ? " (end of file)\n" : "\n";
    out += r.text;
    if (r.capped) out += cap_note(cap) + "\n";
    if (!r.at_eof) {
        out += "[more from line " + std::to_string(r.last + 1) + ": call more, or read with start_line=" +
               std::to_string(r.last + 1) + "]";
        more_path_ = abs;
        more_line_ = r.last + 1;
        more_whole_ = whole;
    } else {
        more_path_.clear();
    }
    return {out, false};
}

ToolResult Tools::more(int64_t count) {
    if (more_path_.empty()) return error("nothing to continue: the last read reached the end of its file");
    return read(more_path_, more_line_, count, false);
}

ToolResult Tools::write(const std::string& path, const std::string& content) {
    const std::string abs = root_.resolve(path);
    struct stat st {};
    const bool exists = ::stat(abs.c_str(), &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) return error(root_.relative(abs) + " exists and is not a regular file");
    const std::string rel = root_.relative(abs);
    const std::string what = "write " + rel + " (" + std::to_string(content.size()) + " bytes" +
                             (exists ? ", replacing " + std::to_string(st.st_size) + " bytes)" : ", new file)");
    if (!approve_("write", what)) return error("the user did not allow: " + what);
    std::error_code ec;
    fs::create_directories(fs::path(abs).parent_path(), ec);
    if (ec) return error("cannot create the directory of " + rel + ": " + ec.message());
    ds4::write_file(abs, content);
    seen_[abs].lines.clear();
    restat(abs);
    mark_seen(abs, 1, std::max<int64_t>(1, count_lines(content)));
    return {"wrote " + rel + " (" + std::to_string(content.size()) + " bytes, " +
                std::to_string(count_lines(content)) + " lines)",
            false};
}

ToolResult Tools::edit(const std::string& path, const std::string& old_text, const std::string& new_text) {
    const std::string abs = root_.resolve(path);
    const std::string rel = root_.relative(abs);
    auto it = seen_.find(abs);
    if (it == seen_.end() || it->second.lines.empty())
        return error(rel + " was never read: read it before editing it");
    struct stat st {};
    if (::stat(abs.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return error(rel + " is not a regular file");
    const int64_t mtime = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    if (int64_t(st.st_size) != it->second.size || mtime != it->second.mtime_ns)
        return error(rel + " changed since it was read: read it again");
    if (old_text.empty()) return error("old is empty: give the exact text to replace");
    if (size_t(st.st_size) > 8u << 20) return error(rel + " is over 8 MB: edit refuses it");
    std::string content = ds4::read_file(abs);
    const size_t at = content.find(old_text);
    if (at == std::string::npos) return error("old text not found in " + rel + " (it must match exactly)");
    size_t n = 0;
    for (size_t p = at; p != std::string::npos; p = content.find(old_text, p + 1)) ++n;
    if (n > 1)
        return error("old text occurs " + std::to_string(n) + " times in " + rel +
                     ": include more lines around it so that it is unique");
    const int64_t first = 1 + int64_t(std::count(content.begin(), content.begin() + ptrdiff_t(at), '\n'));
    int64_t span = int64_t(std::count(old_text.begin(), old_text.end(), '\n'));
    if (old_text.back() == '\n') --span;
    const int64_t last = first + span;
    for (int64_t l = first; l <= last; ++l) {
        bool shown = false;
        for (const auto& r : it->second.lines) shown |= l >= r.first && l <= r.second;
        if (!shown)
            return error("line " + std::to_string(l) + " of " + rel + " was never shown to you: read lines " +
                         std::to_string(first) + "-" + std::to_string(last) + " first");
    }
    const std::string what = "edit " + rel + ": lines " + std::to_string(first) + "-" + std::to_string(last);
    if (!approve_("edit", what)) return error("the user did not allow: " + what);
    content.replace(at, old_text.size(), new_text);
    ds4::write_file(abs, content);
    // Lines after the edit move by the change in line count; the new lines count as shown.
    const int64_t delta = int64_t(std::count(new_text.begin(), new_text.end(), '\n')) -
                          int64_t(std::count(old_text.begin(), old_text.end(), '\n'));
    auto lines = it->second.lines;
    seen_[abs].lines.clear();
    for (auto r : lines) {
        if (r.first > last) r = {r.first + delta, r.second + delta};
        else if (r.second >= last) r.second += delta;
        mark_seen(abs, r.first, r.second);
    }
    mark_seen(abs, first, std::max(first, last + delta));
    restat(abs);
    return {"edited " + rel + ": lines " + std::to_string(first) + "-" + std::to_string(last) + " are now " +
                std::to_string(std::max<int64_t>(1, last + delta - first + 1)) + " lines",
            false};
}

std::string Tools::job_text(const JobReport& r, const std::string& what) const {
    std::string s;
    if (r.finished)
        s = fmt::format("{}: exit code {} after {:.1f} s\n", what, r.exit_code, r.seconds);
    else
        s = fmt::format("{0}: still running after {1:.1f} s, as background job {2} (bash_status id={2} shows new "
                        "output, bash_stop id={2} stops it)\n",
                        what, r.seconds, r.id);
    if (r.dropped > 0)
        s += fmt::format("[{} bytes of output dropped: only the last {} are kept]\n", r.dropped, limits_.bash_bytes);
    s += r.output;
    return s;
}

ToolResult Tools::bash(const std::string& command, double timeout, const std::atomic<bool>* cancel,
                       const std::function<void(std::string_view)>& on_output) {
    if (command.empty()) return error("empty command");
    if (!approve_("bash", "run: " + command)) return error("the user did not allow: run " + command);
    timeout = std::clamp(timeout, 0.0, limits_.bash_timeout_max);
    const JobReport r = jobs_.run(command, timeout, cancel, on_output);
    return {job_text(r, "bash"), r.finished && r.exit_code != 0};
}

}  // namespace ds4::agent
