// The search and list tools (agent/tools.h): a walk of the tree under the root that never
// follows a symbolic link, skips .git, binary and big files, and stops at its caps.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>

#include "agent/text_file.h"
#include "agent/tools.h"
#include "common/error.h"
#include "common/file_io.h"

namespace ds4::agent {
namespace fs = std::filesystem;

namespace {

// A compiled pattern with a match limit, so a pathological pattern fails a line instead of
// hanging the agent.
class Regex {
public:
    explicit Regex(const std::string& pattern) {
        int err = 0;
        PCRE2_SIZE off = 0;
        code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF, &err, &off,
                              nullptr);
        if (!code_) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            fail("bad pattern at offset {}: {}", off, reinterpret_cast<const char*>(msg));
        }
        data_ = pcre2_match_data_create_from_pattern(code_, nullptr);
        ctx_ = pcre2_match_context_create(nullptr);
        pcre2_set_match_limit(ctx_, 200000);
        pcre2_set_depth_limit(ctx_, 10000);
    }
    ~Regex() {
        pcre2_match_context_free(ctx_);
        pcre2_match_data_free(data_);
        pcre2_code_free(code_);
    }
    bool match(std::string_view s) const {
        return pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, PCRE2_NO_UTF_CHECK, data_,
                           ctx_) >= 0;
    }

private:
    pcre2_code* code_ = nullptr;
    pcre2_match_data* data_ = nullptr;
    pcre2_match_context* ctx_ = nullptr;
};

bool valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
        i += n;
    }
    return true;
}

}  // namespace

ToolResult Tools::search(const std::string& pattern, const std::string& path, int64_t max_results) {
    const Regex re(pattern);
    const std::string abs = root_.resolve(path);
    max_results = std::clamp<int64_t>(max_results, 1, limits_.search_results);
    std::vector<std::string> files;
    int64_t looked = 0;
    bool files_capped = false;
    std::error_code ec;
    if (fs::is_regular_file(fs::symlink_status(abs, ec))) {
        files.push_back(abs);
    } else if (fs::is_directory(fs::symlink_status(abs, ec))) {
        for (auto it = fs::recursive_directory_iterator(abs, fs::directory_options::skip_permission_denied, ec);
             !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
            const auto st = it->symlink_status(ec);
            if (fs::is_directory(st) && it->path().filename() == ".git") {
                it.disable_recursion_pending();
                continue;
            }
            if (!fs::is_regular_file(st)) continue;  // links are never followed
            if (++looked > limits_.search_files) {
                files_capped = true;
                break;
            }
            files.push_back(it->path().string());
        }
    } else {
        return {"error: " + root_.relative(abs) + ": no such file or directory", true};
    }
    std::sort(files.begin(), files.end());
    std::string out;
    int64_t hits = 0, skipped = 0;
    bool capped = false;
    for (const std::string& f : files) {
        struct stat st {};
        if (::stat(f.c_str(), &st) != 0 || uint64_t(st.st_size) > limits_.search_file_bytes) {
            ++skipped;
            continue;
        }
        std::string text;
        try {
            text = ds4::read_file(f);
        } catch (const Error&) {
            ++skipped;
            continue;
        }
        if (text.find('\0') != std::string::npos) continue;  // binary
        const std::string rel = root_.relative(f);
        size_t at = 0;
        for (int64_t line = 1; at < text.size() && !capped; ++line) {
            size_t nl = text.find('\n', at);
            if (nl == std::string::npos) nl = text.size();
            std::string_view l(text.data() + at, std::min(nl - at, limits_.line_bytes));
            while (!l.empty() && !valid_utf8(l)) l.remove_suffix(1);
            if (re.match(l)) {
                std::string s = rel + ":" + std::to_string(line) + ": " + std::string(l.substr(0, 300)) + "\n";
                if (out.size() + s.size() > limits_.read_bytes || hits >= max_results) {
                    capped = true;
                    break;
                }
                out += s;
                ++hits;
            }
            at = nl + 1;
        }
        if (capped) break;
    }
    std::string head = std::to_string(hits) + " matching lines";
    if (capped) head += " (stopped at " + std::to_string(max_results) + " lines or " +
                        std::to_string(limits_.read_bytes) + " bytes: narrow the pattern or the path)";
    if (files_capped) head += " (only the first " + std::to_string(limits_.search_files) + " files searched)";
    if (skipped > 0) head += " (" + std::to_string(skipped) + " files over " +
                             std::to_string(limits_.search_file_bytes) + " bytes or unreadable skipped)";
    return {head + "\n" + out, false};
}

ToolResult Tools::list(const std::string& path, int depth) {
    const std::string abs = root_.resolve(path);
    depth = std::clamp(depth, 1, 3);
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(abs, ec)))
        return {"error: " + root_.relative(abs) + " is not a directory", true};
    std::string out = root_.relative(abs) + "/\n";
    int64_t n = 0;
    bool capped = false;
    std::function<void(const fs::path&, int)> walk = [&](const fs::path& dir, int level) {
        std::vector<fs::directory_entry> entries;
        for (auto it = fs::directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
             !ec && it != fs::directory_iterator(); it.increment(ec))
            entries.push_back(*it);
        std::sort(entries.begin(), entries.end(),
                  [](const auto& a, const auto& b) { return a.path().filename() < b.path().filename(); });
        for (const auto& e : entries) {
            if (n >= limits_.list_entries) {
                capped = true;
                return;
            }
            ++n;
            const auto st = e.symlink_status(ec);
            std::string line(size_t(2 * level), ' ');
            line += e.path().filename().string();
            if (fs::is_symlink(st)) {
                line += " -> " + fs::read_symlink(e.path(), ec).string();
            } else if (fs::is_directory(st)) {
                line += "/";
            } else if (fs::is_regular_file(st)) {
                line += "  (" + std::to_string(e.file_size(ec)) + " bytes)";
            }
            out += line + "\n";
            if (fs::is_directory(st) && level + 1 < depth && e.path().filename() != ".git") walk(e.path(), level + 1);
        }
    };
    walk(abs, 0);
    if (capped) out += "[listing capped at " + std::to_string(limits_.list_entries) + " entries]\n";
    return {out, false};
}

}  // namespace ds4::agent
