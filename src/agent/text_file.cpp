#include "agent/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace ds4::agent {
namespace {

// A read-only descriptor, closed on scope exit.
struct Fd {
    int fd;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

LinesRead read_lines(const std::string& path, int64_t start, int64_t max_lines, size_t cap, size_t line_bytes) {
    Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    if (f.fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
    struct stat st {};
    if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
        fail("{}: not a regular file{}", path, S_ISDIR(st.st_mode) ? " (a directory: use list)" : "");
    LinesRead r;
    r.last = start - 1;
    char buf[65536];
    int64_t line = 1;      // the line the next byte belongs to
    std::string cur;       // the current line's kept bytes (when shown)
    uint64_t cur_len = 0;  // its full length
    bool first_block = true, any = false;
    const int64_t end_line = max_lines > INT64_MAX - start ? INT64_MAX : start + max_lines;
    auto flush_line = [&]() -> bool {  // false: stop (cap)
        if (line >= start && line < end_line) {
            std::string s = std::to_string(line) + "\t" + cur;
            if (cur_len > cur.size()) s += " [line cut: " + std::to_string(cur_len) + " bytes]";
            s += "\n";
            if (r.text.size() + s.size() > cap && !r.text.empty()) {
                r.capped = true;
                return false;
            }
            if (s.size() > cap) s = s.substr(0, cap) + "\n";
            r.text += s;
            r.last = line;
        }
        cur.clear();
        cur_len = 0;
        ++line;
        return line < end_line;
    };
    for (;;) {
        const ssize_t n = ::read(f.fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("{}: read failed: {}", path, std::strerror(errno));
        if (n == 0) break;
        if (first_block && std::memchr(buf, 0, size_t(std::min<ssize_t>(n, 8192)))) {
            r.binary = true;
            return r;
        }
        first_block = false;
        any = true;
        const char* p = buf;
        const char* e = buf + n;
        while (p < e) {
            const char* nl = static_cast<const char*>(std::memchr(p, '\n', size_t(e - p)));
            const char* stop = nl ? nl : e;
            if (line >= start && cur.size() < line_bytes)
                cur.append(p, std::min(size_t(stop - p), line_bytes - cur.size()));
            cur_len += uint64_t(stop - p);
            p = stop;
            if (nl) {
                ++p;
                if (!flush_line()) {
                    // Stopped: at the end only if nothing follows.
                    if (r.capped) return r;
                    char c;
                    r.at_eof = p == e && ::read(f.fd, &c, 1) == 0;
                    return r;
                }
            }
        }
    }
    if (cur_len > 0 || !any) {
        if (cur_len > 0 && !flush_line() && r.capped) return r;
    }
    r.at_eof = true;
    if (r.text.empty()) r.last = std::min(r.last, line - 1);
    return r;
}

int64_t count_lines(std::string_view text) {
    const int64_t n = int64_t(std::count(text.begin(), text.end(), '\n'));
    return n + (!text.empty() && text.back() != '\n' ? 1 : 0);
}

}  // namespace ds4::agent
