#include "server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "gguf/reader.h"
#include "model/deepseek4/config.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4::servertest {
namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out) fail("cannot write {}", path);
}

std::string scratch_dir() {
    static int n = 0;
    const auto p = std::filesystem::temp_directory_path() /
                   ("ds4-server-test-" + std::to_string(getpid()) + "-" + std::to_string(n++));
    std::filesystem::create_directories(p);
    return p.string();
}

// Starts argv[0] with argv, stdout to /dev/null and stderr to `log`.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
    const pid_t pid = fork();
    if (pid < 0) fail("fork failed");
    if (pid == 0) {
        // dup2, not freopen: freopen would flush the parent's buffered stdout a second time.
        const int e = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        const int o = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (e < 0 || o < 0 || ::dup2(e, 2) < 0 || ::dup2(o, 1) < 0) _exit(126);
        std::vector<char*> cargv;
        for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
        cargv.push_back(nullptr);
        execv(cargv[0], cargv.data());
        _exit(127);
    }
    return pid;
}

// A loopback port that was free a moment ago (bound to port 0, then closed).
uint16_t free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("socket: {}", std::strerror(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        ::close(fd);
        fail("cannot find a free port: {}", std::strerror(errno));
    }
    ::close(fd);
    return ntohs(a.sin_port);
}

// The value after `flag` in args ("" when absent).
std::string flag_value(const std::vector<std::string>& args, const std::string& flag) {
    const auto it = std::find(args.begin(), args.end(), flag);
    return it == args.end() || it + 1 == args.end() ? std::string() : *(it + 1);
}

// SIGTERM, up to timeout_s for the exit, then SIGKILL.
void stop(pid_t pid, double timeout_s) {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        if (waitpid(pid, &status, WNOHANG) == pid) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
}

}  // namespace

int pipeline_workers_from_env() {
    const char* v = std::getenv("DS4_TEST_SERVER_PIPELINE");
    const std::string s = v ? v : "";
    if (s.empty() || s == "0") return 0;
    if (s == "1" || s == "2") return std::stoi(s);
    fail("DS4_TEST_SERVER_PIPELINE={}: expected 0, 1 or 2 (workers)", s);
}

PipelineWorkers::PipelineWorkers(const std::string& model, int workers, const std::vector<std::string>& extra) {
    const deepseek4::ModelConfig cfg = deepseek4::ModelConfig::from_gguf(*gguf::File::open(model));
    const uint32_t n_layer = cfg.n_layer;
    const uint32_t parts = uint32_t(workers) + 1;
    if (workers < 1 || n_layer < parts) fail("cannot split {} layers over {} processes", n_layer, parts);
    // Process i holds layers [i * n / parts, (i + 1) * n / parts).
    auto first = [&](uint32_t i) { return uint32_t(uint64_t(i) * n_layer / parts); };
    dir_ = scratch_dir();
    port_ = free_port();
    coordinator_layers_ = fmt::format("0:{}", first(1) - 1);
    for (uint32_t i = 1; i < parts; ++i) {
        const std::string layers = i + 1 == parts ? fmt::format("{}:output", first(i))
                                                  : fmt::format("{}:{}", first(i), first(i + 1) - 1);
        std::vector<std::string> argv = {test::binary("ds4"), "-m", model, "-t", "1", "--role", "worker",
                                         "--layers", layers, "--coordinator", "127.0.0.1", std::to_string(port_),
                                         "--listen", "127.0.0.1", "0"};
        // A worker must hold the coordinator's context: without a --ctx of the caller's, the
        // server's default (32768, or the trained context when smaller).
        if (std::find(extra.begin(), extra.end(), "--ctx") == extra.end())
            argv.insert(argv.end(), {"--ctx", std::to_string(std::min<uint64_t>(32768, cfg.context_length))});
        argv.insert(argv.end(), extra.begin(), extra.end());
        pids_.push_back(spawn(argv, fmt::format("{}/worker{}.log", dir_, i)));
    }
}

PipelineWorkers::~PipelineWorkers() {
    for (const pid_t pid : pids_) stop(pid, 5);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

std::vector<std::string> PipelineWorkers::coordinator_args() const {
    return {"--role", "coordinator", "--layers", coordinator_layers_, "--listen", "127.0.0.1",
            std::to_string(port_), "--dist-route-timeout", "30"};
}

bool PipelineWorkers::running() const {
    for (const pid_t pid : pids_) {
        int status;
        if (waitpid(pid, &status, WNOHANG) != 0) return false;
    }
    return true;
}

std::string PipelineWorkers::log() const {
    std::string out;
    for (size_t i = 1; i <= pids_.size(); ++i)
        out += fmt::format("--- worker {} ---\n{}", i, read_file(fmt::format("{}/worker{}.log", dir_, i)));
    return out;
}

const std::string& tiny_model() {
    // ctest runs every test in its own process: generate the model once per build of the
    // generator and share it (keyed by the generator's size and time, renamed into place
    // atomically so parallel tests never see a partial file).
    static const std::string path = [] {
        const std::string gen = test::binary("ds4-gguf-gen");
        std::error_code ec;
        const auto stamp = std::filesystem::last_write_time(gen, ec).time_since_epoch().count();
        const auto size = std::filesystem::file_size(gen, ec);
        const std::string p = fmt::format("{}/tiny-{}-{}.gguf", DS4_SERVER_TEST_DIR, size, stamp);
        if (std::filesystem::exists(p)) return p;
        std::filesystem::create_directories(DS4_SERVER_TEST_DIR);
        const std::string tmp = fmt::format("{}.{}.tmp", p, getpid());
        const auto r = test::write_tiny_model(tmp, test::kTinyQ8Io);
        if (r.exit_code != 0) fail("ds4-gguf-gen failed: {}", r.output);
        std::filesystem::rename(tmp, p);
        return p;
    }();
    return path;
}

const std::string& glm_model() {
    static const std::string path = [] {
        const std::string gen = test::binary("ds4-gguf-gen");
        std::error_code ec;
        const auto stamp = std::filesystem::last_write_time(gen, ec).time_since_epoch().count();
        const auto size = std::filesystem::file_size(gen, ec);
        const std::string p = fmt::format("{}/glm-tiny-{}-{}.gguf", DS4_SERVER_TEST_DIR, size, stamp);
        if (std::filesystem::exists(p)) return p;
        std::filesystem::create_directories(DS4_SERVER_TEST_DIR);
        const std::string tmp = fmt::format("{}.{}.tmp", p, getpid());
        const auto r = test::run_command({gen, "-q", "--arch", "glm-dsa", "--seed", "3", "-o", tmp});
        if (r.exit_code != 0) fail("ds4-gguf-gen --arch glm-dsa failed: {}", r.output);
        std::filesystem::rename(tmp, p);
        return p;
    }();
    return path;
}

ServerProcess::ServerProcess(std::vector<std::string> args, const nlohmann::json& forced, Pipeline pipeline) {
    if (pipeline == Pipeline::from_env && std::find(args.begin(), args.end(), "--role") == args.end())
        if (const int n = pipeline_workers_from_env(); n > 0) {
            const std::string m = flag_value(args, "-m");
            std::vector<std::string> extra;
            if (std::find(args.begin(), args.end(), "--no-qat") != args.end()) extra.push_back("--no-qat");
            if (const std::string ctx = flag_value(args, "--ctx"); !ctx.empty()) extra.insert(extra.end(), {"--ctx", ctx});
            workers_ = std::make_shared<PipelineWorkers>(m.empty() ? tiny_model() : m, n, extra);
        }
    start(std::move(args), forced);
}

ServerProcess::ServerProcess(std::vector<std::string> args, const nlohmann::json& forced,
                             std::shared_ptr<PipelineWorkers> workers)
    : workers_(std::move(workers)) {
    if (!workers_) fail("ServerProcess: no workers given");
    start(std::move(args), forced);
}

void ServerProcess::start(std::vector<std::string> args, const nlohmann::json& forced) {
    dir_ = scratch_dir();
    std::vector<std::string> argv = {test::binary("ds4-server"), "-t", "1"};
    if (std::find(args.begin(), args.end(), "-m") == args.end()) argv.insert(argv.end(), {"-m", tiny_model()});
    if (workers_) {
        const auto c = workers_->coordinator_args();
        argv.insert(argv.end(), c.begin(), c.end());
    }
    if (std::find(args.begin(), args.end(), "--port") == args.end()) argv.insert(argv.end(), {"--port", "0"});
    if (!forced.is_null()) {
        write_file(dir_ + "/forced.json", forced.dump());
        argv.push_back("--test-force-output");
        argv.push_back(dir_ + "/forced.json");
    }
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string log = dir_ + "/server.log";
    pid_ = fork();
    if (pid_ < 0) fail("fork failed");
    if (pid_ == 0) {
        FILE* f = std::freopen(log.c_str(), "w", stderr);
        (void)f;
        std::vector<char*> cargv;
        for (auto& a : argv) cargv.push_back(a.data());
        cargv.push_back(nullptr);
        execv(cargv[0], cargv.data());
        _exit(127);
    }
    // A server that never listens throws from the constructor, so no destructor removes the
    // scratch directory: it goes here.
    const auto abandon = [this](const std::string& why) {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
        fail("{}", why);
    };
    const std::regex listening(R"(listening on (http://[0-9.]+:[0-9]+))");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
        std::smatch m;
        const std::string text = read_file(log);
        if (std::regex_search(text, m, listening)) {
            url_ = m[1];
            // A coordinator listens only once its route is complete.
            if (workers_ && text.find("route complete") == std::string::npos) {
                stop(pid_, 0);
                pid_ = -1;
                abandon(fmt::format("ds4-server listens without a complete route: {}", text));
            }
            return;
        }
        int status;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            abandon(fmt::format("ds4-server exited before listening: {}{}", text, workers_ ? "\n" + workers_->log() : ""));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    stop(pid_, 0);
    pid_ = -1;
    abandon(fmt::format("ds4-server did not start listening in 60 s: {}{}", read_file(log),
                        workers_ ? "\n" + workers_->log() : ""));
}

int ServerProcess::port() const { return std::stoi(url_.substr(url_.rfind(':') + 1)); }

int ServerProcess::terminate(double timeout_s, int sig) {
    if (pid_ < 0) return -1;
    kill(pid_, sig);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return -1;
}

ServerProcess::~ServerProcess() {
    terminate();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

std::string ServerProcess::log() const { return read_file(dir_ + "/server.log"); }

nlohmann::json HttpResult::json() const { return nlohmann::json::parse(body); }

namespace {
std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower(uint8_t(c)));
    return s;
}
}  // namespace

std::string HttpResult::header(const std::string& name) const {
    std::istringstream in(headers);
    std::string line;
    const std::string want = lower(name) + ":";
    while (std::getline(in, line)) {
        if (lower(line).rfind(want, 0) != 0) continue;
        std::string v = line.substr(want.size());
        while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(0, 1);
        while (!v.empty() && (v.back() == '\r' || v.back() == ' ')) v.pop_back();
        return v;
    }
    return {};
}

HttpResult http(const std::string& method, const std::string& url, const std::string& body,
                const std::vector<std::string>& headers, double max_time_s) {
    const std::string dir = scratch_dir();
    std::vector<std::string> argv = {"curl", "-sS", "-N", "-X", method, "-o", dir + "/out", "-D", dir + "/headers",
                                     "-w", "%{http_code}", "--max-time", std::to_string(max_time_s)};
    bool content_type = false;
    for (const auto& h : headers) {
        argv.push_back("-H");
        argv.push_back(h);
        content_type = content_type || lower(h).rfind("content-type:", 0) == 0;
    }
    if (!body.empty()) {
        write_file(dir + "/body", body);
        if (!content_type) argv.insert(argv.end(), {"-H", "Content-Type: application/json"});
        argv.insert(argv.end(), {"--data-binary", "@" + dir + "/body"});
    }
    argv.push_back(url);
    const auto r = test::run_command(argv);
    HttpResult h;
    const size_t digits = r.output.find_last_not_of("0123456789");
    const std::string code = r.output.substr(digits == std::string::npos ? 0 : digits + 1);
    h.status = code.empty() ? 0 : std::stoi(code);
    h.body = read_file(dir + "/out");
    h.headers = read_file(dir + "/headers");
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return h;
}

RawConnection::RawConnection(const std::string& url, const std::string& source) {
    // url: http://IP:PORT
    const std::string hostport = url.substr(url.find("//") + 2);
    const std::string ip = hostport.substr(0, hostport.rfind(':'));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(uint16_t(std::stoi(hostport.substr(hostport.rfind(':') + 1))));
    if (inet_pton(AF_INET, ip.c_str(), &to.sin_addr) != 1) fail("RawConnection: bad url {}", url);
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) fail("socket: {}", std::strerror(errno));
    if (!source.empty()) {
        sockaddr_in from{};
        from.sin_family = AF_INET;
        inet_pton(AF_INET, source.c_str(), &from.sin_addr);
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0)
            fail("cannot bind a client socket to {}: {}", source, std::strerror(errno));
    }
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0)
        fail("cannot connect to {}: {}", url, std::strerror(errno));
}

RawConnection::~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
}

bool RawConnection::send(const std::string& bytes) {
    size_t at = 0;
    while (at < bytes.size()) {
        const ssize_t n = ::send(fd_, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
        if (n <= 0) return false;
        at += size_t(n);
    }
    return true;
}

bool RawConnection::readable(double timeout_s) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, int(timeout_s * 1000)) > 0;
}

std::string RawConnection::read_all(double timeout_s) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    char buf[65536];
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) break;
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, int(left)) <= 0) break;
        const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n <= 0) break;
        out.append(buf, size_t(n));
    }
    return out;
}

int status_of(const std::string& response) {
    std::smatch m;
    static const std::regex status_line(R"(^HTTP/1\.[01] ([0-9]{3}))");
    return std::regex_search(response, m, status_line) ? std::stoi(m[1]) : 0;
}

long rss_kib(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return -1;
}

std::vector<SseEvent> parse_sse(const std::string& body) {
    std::vector<SseEvent> out;
    std::istringstream in(body);
    std::string line;
    SseEvent cur;
    while (std::getline(in, line)) {
        if (line.empty()) {
            if (!cur.data.empty() || !cur.event.empty()) out.push_back(cur);
            cur = {};
        } else if (line[0] == ':') {
            out.push_back({"comment", line.substr(1)});
        } else if (line.rfind("event: ", 0) == 0) {
            cur.event = line.substr(7);
        } else if (line.rfind("data: ", 0) == 0) {
            cur.data += line.substr(6);
        }
    }
    if (!cur.data.empty()) out.push_back(cur);
    return out;
}

std::string clients_dir() { return std::string(DS4_SOURCE_DIR) + "/.cache/clients"; }

bool node_clients_available(std::string& why) {
    if (test::run_command({"node", "--version"}).exit_code != 0) {
        why = "node is not installed (scripts/setup.sh)";
        return false;
    }
    for (const char* pkg : {"openai", "@anthropic-ai/sdk"})
        if (!std::filesystem::exists(clients_dir() + "/node_modules/" + pkg + "/package.json")) {
            why = std::string("npm client ") + pkg + " missing in .cache/clients (run scripts/setup.sh)";
            return false;
        }
    return true;
}

}  // namespace ds4::servertest
