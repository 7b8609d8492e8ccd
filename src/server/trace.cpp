#include "server/trace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file_io.h"
#include "server/host_policy.h"

namespace ds4::server {
namespace {

using ojson = nlohmann::ordered_json;

bool secret_header(const std::string& name) {
    const std::string n = ascii_lower(name);
    return n == "authorization" || n == "proxy-authorization" || n == "x-api-key" || n == "cookie";
}

ojson headers_json(const Trace::Headers& headers) {
    ojson h = ojson::array();
    for (const auto& [k, v] : headers) h.push_back({k, secret_header(k) ? std::string("[redacted]") : v});
    return h;
}

std::string utc_now() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t secs = std::chrono::system_clock::to_time_t(now);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    return fmt::format("{}.{:03d}Z", buf, int(ms));
}

}  // namespace

Trace::Trace(const std::string& path) : opened_(std::chrono::steady_clock::now()) {
    // It holds prompts and answers: created 0600, never through a symlink (one planted at the
    // name would send them elsewhere), only a regular file (O_NONBLOCK: a FIFO does not hang).
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == ELOOP) fail("--trace: {} is a symbolic link; give the file itself", path);
        fail("--trace: cannot open {} for appending: {}", path, std::strerror(errno));
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const char* kind = fstat(fd, &st) == 0 ? file_kind(st.st_mode) : "unreadable";
        ::close(fd);
        fail("--trace: {} is {}, not a regular file", path, kind);
    }
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    file_ = ::fdopen(fd, "a");
    if (!file_) {
        const int e = errno;
        ::close(fd);
        fail("--trace: cannot open {} for appending: {}", path, std::strerror(e));
    }
}

Trace::~Trace() {
    if (file_) std::fclose(file_);
}

void Trace::write(std::string line) {
    line += '\n';
    std::lock_guard lock(mutex_);
    std::fwrite(line.data(), 1, line.size(), file_);
    std::fflush(file_);
}

namespace {

ojson record(uint64_t seq, const char* type, std::chrono::steady_clock::time_point opened) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - opened).count();
    return {{"seq", seq}, {"type", type}, {"time", utc_now()}, {"t", std::round(t * 1e6) / 1e6}};
}

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

}  // namespace

uint64_t Trace::request(const HttpRequest& req) {
    uint64_t seq;
    {
        std::lock_guard lock(mutex_);
        seq = ++next_seq_;
    }
    ojson j = record(seq, "request", opened_);
    j["method"] = req.method;
    j["target"] = req.target;
    j["peer"] = req.peer;
    j["headers"] = headers_json(req.headers);
    j["body"] = req.body;
    write(dump(j));
    return seq;
}

void Trace::response(uint64_t seq, int status, const Headers& headers, std::string_view body) {
    ojson j = record(seq, "response", opened_);
    j["status"] = status;
    j["headers"] = headers_json(headers);
    j["body"] = body;
    write(dump(j));
}

void Trace::stream(uint64_t seq, int status, const Headers& headers) {
    ojson j = record(seq, "stream", opened_);
    j["status"] = status;
    j["headers"] = headers_json(headers);
    write(dump(j));
}

void Trace::events(uint64_t seq, std::string_view bytes) {
    while (!bytes.empty()) {
        const size_t end = bytes.find("\n\n");
        const size_t n = end == std::string_view::npos ? bytes.size() : end + 2;
        ojson j = record(seq, "event", opened_);
        j["data"] = bytes.substr(0, n);
        write(dump(j));
        bytes.remove_prefix(n);
    }
}

void Trace::end(uint64_t seq, bool complete) {
    ojson j = record(seq, "end", opened_);
    j["complete"] = complete;
    write(dump(j));
}

}  // namespace ds4::server
