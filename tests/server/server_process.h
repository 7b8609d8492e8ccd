// Test helpers for ds4-server: the tiny real-vocabulary model (generated once per test
// binary), a server process on a free port, and HTTP through curl.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ds4::servertest {

// Path of the tiny model (ds4-gguf-gen --preset tiny --real-vocab), generated on first use.
const std::string& tiny_model();

class ServerProcess {
public:
    // Starts ds4-server -m tiny_model() --port 0 plus `args`; `forced` (if not empty) is
    // written to a file and passed as --test-force-output. Waits for the listening line.
    explicit ServerProcess(std::vector<std::string> args = {}, const nlohmann::json& forced = nullptr);
    ~ServerProcess();  // SIGTERM, then SIGKILL if it does not exit
    ServerProcess(const ServerProcess&) = delete;
    ServerProcess& operator=(const ServerProcess&) = delete;

    const std::string& url() const { return url_; }  // http://127.0.0.1:PORT
    // Sends SIGTERM and waits; returns the exit status (-1: killed or timed out).
    int terminate(double timeout_s = 20);
    std::string log() const;  // the server's stderr so far
    pid_t pid() const { return pid_; }

private:
    std::string dir_;
    std::string url_;
    pid_t pid_ = -1;
};

struct HttpResult {
    int status = 0;
    std::string body;
    nlohmann::json json() const;  // body parsed (throws on invalid JSON)
};

// One request with curl. `body` empty: GET (unless method says otherwise).
HttpResult http(const std::string& method, const std::string& url, const std::string& body = {},
                const std::vector<std::string>& headers = {}, double max_time_s = 60);
inline HttpResult post(const std::string& url, const nlohmann::json& body,
                       const std::vector<std::string>& headers = {}) {
    return http("POST", url, body.dump(), headers);
}

// SSE records of a stream body: (event name or "", data) in order; ": comment" lines are
// returned as ("comment", text).
struct SseEvent {
    std::string event;
    std::string data;
};
std::vector<SseEvent> parse_sse(const std::string& body);

// Whether node and the npm clients (scripts/setup.sh -> .cache/clients) are installed; when
// not, `why` says what is missing.
bool node_clients_available(std::string& why);
std::string clients_dir();  // DS4_SOURCE_DIR/.cache/clients

}  // namespace ds4::servertest
