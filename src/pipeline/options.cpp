#include "pipeline/options.h"

#include <fmt/format.h>

#include <map>
#include <vector>

#include "common/cli_checks.h"
#include "dist/connection.h"

namespace ds4::pipeline {
namespace {

// HOST PORT as two values; the port in [lo, 65535].
void add_endpoint(CLI::App& app, const std::string& name, std::string& host, int& port, int lo,
                  const std::string& help) {
    app.add_option_function<std::vector<std::string>>(
           name,
           [&host, &port, name, lo](const std::vector<std::string>& v) {
               host = v.at(0);
               size_t used = 0;
               long p = -1;
               try {
                   p = std::stol(v.at(1), &used);
               } catch (const std::exception&) {
                   used = 0;
               }
               if (used != v.at(1).size() || p < lo || p > 65535)
                   throw CLI::ValidationError(name, fmt::format("port must be in [{}, 65535], got {}", lo, v.at(1)));
               port = int(p);
           },
           help)
        ->expected(2)
        ->option_text("HOST PORT")
        ->group("Distributed");
}

}  // namespace

void add_dist_flags(CLI::App& app, DistOptions& o) {
    const std::map<std::string, Role> roles = {{"coordinator", Role::coordinator}, {"worker", Role::worker}};
    app.add_option("--role", o.role,
                   "Pipeline role: coordinator (runs the first layers and the front end) or worker "
                   "(serves a layer range to a coordinator)")
        ->transform(CLI::CheckedTransformer(roles, CLI::ignore_case))
        ->option_text("ROLE")
        ->group("Distributed");
    app.add_option("--layers", o.layers,
                   "Layers this process holds, inclusive: A:B, or A:output for A to the last layer and "
                   "the output head (coordinator: 0:K)")
        ->option_text("A:B")
        ->group("Distributed");
    add_endpoint(app, "--listen", o.listen_host, o.listen_port, 0,
                 "Coordinator: where workers register; worker: its data address (port 0: any free; "
                 "default 0.0.0.0 0)");
    add_endpoint(app, "--coordinator", o.coordinator_host, o.coordinator_port, 1,
                 "Worker: the coordinator's --listen address");
    app.add_option("--dist-key", o.key_file,
                   "Shared secret (at least 16 bytes) authenticating every pipeline connection; give "
                   "every process the same file (without it: no authentication)")
        ->option_text("FILE")
        ->group("Distributed");
    app.add_option("--dist-prefill-chunk", o.prefill_chunk,
                   "Tokens per pipeline request (default 0: each evaluation call's tokens at once)")
        ->check(cli_checks::at_least(0))
        ->group("Distributed");
    app.add_option("--dist-prefill-window", o.prefill_window,
                   "Prefill chunks in flight along the route while the next one runs here (default 0: "
                   "workers + 2, at most 8; 1: one at a time)")
        ->check(cli_checks::in_range(0, 64))
        ->group("Distributed");
    app.add_option("--dist-activation-bits", o.activation_bits,
                   "Hidden states on the wire: 32 (f32, exact), 16 (IEEE f16) or 8 (FP8 E4M3, saturating at "
                   "240); set on the coordinator (default 32)")
        ->check(CLI::IsMember({32u, 16u, 8u}))
        ->option_text("32|16|8")
        ->group("Distributed");
    app.add_option("--dist-route-timeout", o.route_timeout_s,
                   "Seconds the coordinator waits for workers to cover every layer (default 300)")
        ->check(CLI::Range(0.0, 1e9))
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->option_text("SEC")
        ->group("Distributed");
    app.add_option("--dist-timeout", o.timeout_s,
                   "Seconds a pipeline peer may keep this process waiting: for the answer to work in "
                   "flight (raise it when one request may compute longer), for reading what is sent, for "
                   "TCP acknowledgements and keepalive probes (a vanished host); a handshake or connect "
                   "gets at most 10 (default 60; 0: no such deadlines)")
        ->check(CLI::Range(0.0, 1e6))
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->option_text("SEC")
        ->group("Distributed");
    app.add_flag("--debug", o.debug, "Pipeline: print route formation and per-hop telemetry")->group("Distributed");
}

std::string dist_options_error(const DistOptions& o) {
    const bool dist_flag = !o.layers.empty() || o.listen_port >= 0 || o.coordinator_port >= 0 || !o.key_file.empty();
    switch (o.role) {
        case Role::none:
            if (dist_flag) return "--layers, --listen, --coordinator and --dist-key need --role coordinator|worker";
            return "";
        case Role::coordinator:
            if (o.layers.empty()) return "--role coordinator needs --layers 0:K (its own first layers)";
            if (o.listen_port < 0) return "--role coordinator needs --listen HOST PORT (where workers register)";
            if (o.coordinator_port >= 0) return "--coordinator HOST PORT is a worker's flag";
            return "";
        case Role::worker:
            if (o.layers.empty()) return "--role worker needs --layers A:B or A:output";
            if (o.coordinator_port < 0) return "--role worker needs --coordinator HOST PORT";
            return "";
    }
    return "";
}

void apply_dist_options(const DistOptions& o) {
    dist::check_environment();
    dist::set_peer_timeout(o.timeout_s);
}

}  // namespace ds4::pipeline
