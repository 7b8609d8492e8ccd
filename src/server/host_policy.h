// Which Host and Origin values ds4-server answers (docs/SERVER.md "Security"): a web page the
// user visits must not be able to drive the local server, neither directly (its Origin) nor
// through DNS rebinding (a hostname of the attacker's that resolves to 127.0.0.1, sent as the
// Host). Accepted: "localhost", the bound address as an IP literal (any IP literal when bound
// to a wildcard address: an IP cannot be rebound), and every --allowed-host name. Ports are
// not compared. Pure functions, no sockets.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ds4::server {

// ASCII lower case (header names, host names and schemes compare case-insensitively).
std::string ascii_lower(std::string_view s);

struct HostPolicy {
    std::string bound;                  // the address the listener is bound to
    std::vector<std::string> allowed;   // --allowed-host names (any case)
};

// "localhost", 127.0.0.0/8, ::1.
bool is_loopback_host(std::string_view host);
// The host name of a Host header value ("name", "name:port", "[v6]", "[v6]:port"), in lower
// case; "" when the value is malformed.
std::string host_name(std::string_view host_header);
bool host_allowed(const HostPolicy& policy, std::string_view host_header);
// An Origin header ("scheme://host[:port]"); "null" and malformed origins are refused.
bool origin_allowed(const HostPolicy& policy, std::string_view origin);

}  // namespace ds4::server
