// Test helpers for ds4-server: the tiny real-vocabulary model (generated once per test
// binary), a server process on a free port, and HTTP through curl.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ds4::servertest {

// Path of the tiny model (ds4-gguf-gen --preset tiny --real-vocab), generated on first use.
const std::string& tiny_model();
// Path of the GLM 5.2 tiny model (ds4-gguf-gen --arch glm-dsa), generated on first use.
const std::string& glm_model();

// `ds4 --role worker` processes holding the later layers of a model on loopback, for a
// ds4-server coordinator (docs/DISTRIBUTED.md). The layer count (from the file) is split evenly
// over the coordinator and the workers: 6 layers with 2 workers are 0:1 here, 2:3 and 4:output.
// The workers register with 127.0.0.1:port() and keep retrying while no coordinator listens
// there, so a coordinator that is killed can be replaced by a new one with the same workers.
class PipelineWorkers {
public:
    // `extra` goes to every worker (e.g. --no-qat, which must match the coordinator's).
    PipelineWorkers(const std::string& model, int workers, const std::vector<std::string>& extra = {});
    ~PipelineWorkers();  // SIGTERM, then SIGKILL if a worker does not exit within 5 s
    PipelineWorkers(const PipelineWorkers&) = delete;
    PipelineWorkers& operator=(const PipelineWorkers&) = delete;

    // ds4-server's flags for the coordinator: --role coordinator --layers 0:K --listen
    // 127.0.0.1 PORT --dist-route-timeout 30.
    std::vector<std::string> coordinator_args() const;
    // Whether every worker is still running (none exited or crashed).
    bool running() const;
    std::string log() const;  // every worker's stderr, each under a header line

private:
    std::string dir_;
    uint16_t port_ = 0;
    std::string coordinator_layers_;
    std::vector<pid_t> pids_;
};

// DS4_TEST_SERVER_PIPELINE=N (N = 1 or 2; unset, empty or 0: off) runs every ServerProcess as
// a pipeline coordinator with N workers (docs/SERVER.md "Tests"). Throws for other values.
int pipeline_workers_from_env();

class ServerProcess {
public:
    // Starts ds4-server -m tiny_model() (unless `args` has -m) --port 0 (unless `args` has
    // --port) plus `args`;
    // `forced` (if not empty) is written to a file and passed as --test-force-output. Waits
    // for the listening line; throws ds4::Error with the server's log if it exits first.
    // With DS4_TEST_SERVER_PIPELINE set (and no --role in `args`), the server is a pipeline
    // coordinator: it starts its own workers for the same -m model (and --no-qat), which it
    // stops when it is destroyed. Pipeline::off: one process whatever the environment says.
    enum class Pipeline { from_env, off };
    explicit ServerProcess(std::vector<std::string> args = {}, const nlohmann::json& forced = nullptr,
                           Pipeline pipeline = Pipeline::from_env);
    // The coordinator of `workers` (shared: they outlive this server when the caller keeps them).
    ServerProcess(std::vector<std::string> args, const nlohmann::json& forced,
                  std::shared_ptr<PipelineWorkers> workers);
    ~ServerProcess();  // SIGTERM, then SIGKILL if it does not exit; then its own workers
    ServerProcess(const ServerProcess&) = delete;
    ServerProcess& operator=(const ServerProcess&) = delete;

    const std::string& url() const { return url_; }  // http://127.0.0.1:PORT
    int port() const;
    // Sends `sig` and waits; returns the exit status (-1: killed or timed out).
    int terminate(double timeout_s = 20, int sig = SIGTERM);
    std::string log() const;  // the server's stderr so far
    pid_t pid() const { return pid_; }
    // The pipeline's workers (null when the server runs the whole model).
    const std::shared_ptr<PipelineWorkers>& workers() const { return workers_; }

private:
    void start(std::vector<std::string> args, const nlohmann::json& forced);

    std::string dir_;
    std::string url_;
    pid_t pid_ = -1;
    std::shared_ptr<PipelineWorkers> workers_;
};

struct HttpResult {
    int status = 0;
    std::string body;
    std::string headers;          // the response header section as received
    nlohmann::json json() const;  // body parsed (throws on invalid JSON)
    // The value of response header `name` (any case), "" when absent.
    std::string header(const std::string& name) const;
};

// One request with curl. `body` empty: GET (unless method says otherwise). A body is sent
// as application/json unless `headers` has a Content-Type ("Content-Type:" sends none).
HttpResult http(const std::string& method, const std::string& url, const std::string& body = {},
                const std::vector<std::string>& headers = {}, double max_time_s = 60);
inline HttpResult post(const std::string& url, const nlohmann::json& body,
                       const std::vector<std::string>& headers = {}) {
    return http("POST", url, body.dump(), headers);
}

// A plain TCP connection to the server at `url`, for what curl will not do (slow headers,
// missing lengths, oversized headers and bodies), optionally from another loopback source
// address (127.0.0.2, ...: a different client to the server).
class RawConnection {
public:
    explicit RawConnection(const std::string& url, const std::string& source = {});
    ~RawConnection();
    RawConnection(const RawConnection&) = delete;
    RawConnection& operator=(const RawConnection&) = delete;

    // Sends all of `bytes`; false once the server closed or reset the connection.
    bool send(const std::string& bytes);
    // Whether bytes (or the end) can be read now, waiting up to timeout_s.
    bool readable(double timeout_s = 0);
    // Reads until the server closes the connection or timeout_s passes.
    std::string read_all(double timeout_s);
    bool ok() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

// The status of a raw HTTP response ("HTTP/1.1 NNN ..."), 0 when there is none.
int status_of(const std::string& response);

// Resident memory of process `pid` in KiB (/proc/PID/status VmRSS).
long rss_kib(pid_t pid);

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
