// The pipeline's command-line flags (docs/DISTRIBUTED.md, "Running"), declared once so every
// front end that can be a coordinator (ds4 now; ds4-server, ds4-bench later) offers the same
// ones with the same rules.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace ds4::pipeline {

enum class Role { none, coordinator, worker };

struct DistOptions {
    Role role = Role::none;           // --role coordinator|worker
    std::string layers;               // --layers A:B | A:output (the range this process holds)
    std::string listen_host;          // --listen HOST PORT: coordinator: workers register here;
    int listen_port = -1;             //   worker: its data port (0: any free port)
    std::string coordinator_host;     // --coordinator HOST PORT (workers)
    int coordinator_port = -1;
    std::string key_file;             // --dist-key FILE (empty: no authentication)
    int64_t prefill_chunk = 0;        // --dist-prefill-chunk N: tokens per WORK (0: a call's span)
    int64_t prefill_window = 0;       // --dist-prefill-window N: ACK-only chunks in flight (0: workers + 2, <= 8)
    uint32_t activation_bits = 32;    // --dist-activation-bits 32|16|8: hidden states on the wire
    double route_timeout_s = 300;     // --dist-route-timeout SEC: how long the coordinator waits
    double timeout_s = 60;            // --dist-timeout SEC: a silent peer is given up after it (0: never)
    bool debug = false;               // --debug: route formation and per-hop telemetry
};

// Adds the flags to `app` (group "Distributed").
void add_dist_flags(CLI::App& app, DistOptions& o);
// The combinations the flags need ("--role worker needs --coordinator HOST PORT", ...): the
// message of the first one missing, or "" when fine.
std::string dist_options_error(const DistOptions& o);
// Applies the process-wide settings of the flags (the peer timeout, dist::set_peer_timeout) and
// checks the environment overrides; before any pipeline socket is made.
void apply_dist_options(const DistOptions& o);

}  // namespace ds4::pipeline
