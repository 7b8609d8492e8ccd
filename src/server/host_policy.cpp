#include "server/host_policy.h"

#include <arpa/inet.h>

#include <array>
#include <cstring>
#include <optional>

namespace ds4::server {

std::string ascii_lower(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    return out;
}

namespace {

// An IP literal in binary form (family, 16 bytes), or nullopt for a name.
struct Ip {
    int family;
    std::array<unsigned char, 16> bytes{};
    bool operator==(const Ip& o) const { return family == o.family && bytes == o.bytes; }
};

std::optional<Ip> parse_ip(const std::string& s) {
    Ip ip{AF_INET, {}};
    if (inet_pton(AF_INET, s.c_str(), ip.bytes.data()) == 1) return ip;
    ip.family = AF_INET6;
    if (inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) == 1) return ip;
    return std::nullopt;
}

bool is_wildcard(const Ip& ip) {
    for (unsigned char b : ip.bytes)
        if (b != 0) return false;
    return true;
}

}  // namespace

bool is_loopback_host(std::string_view host) {
    std::string h = ascii_lower(host);
    if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
    if (h == "localhost") return true;
    const auto ip = parse_ip(h);
    if (!ip) return false;
    if (ip->family == AF_INET) return ip->bytes[0] == 127;
    static const std::array<unsigned char, 16> v6_loopback{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return ip->bytes == v6_loopback;
}

std::string host_name(std::string_view v) {
    if (v.empty()) return {};
    if (v.front() == '[') {
        const size_t close = v.find(']');
        if (close == std::string_view::npos) return {};
        const std::string_view rest = v.substr(close + 1);
        if (!rest.empty() && rest.front() != ':') return {};
        return ascii_lower(v.substr(1, close - 1));
    }
    const size_t colon = v.find(':');
    if (colon != std::string_view::npos && v.find(':', colon + 1) != std::string_view::npos) return {};
    const std::string_view name = v.substr(0, colon);
    for (char c : name)
        if (c <= ' ' || c == '/' || c == '@' || c == '\\' || uint8_t(c) >= 0x7f) return {};
    return ascii_lower(name);
}

bool host_allowed(const HostPolicy& policy, std::string_view host_header) {
    std::string name = host_name(host_header);
    if (name.empty()) return false;
    if (name.back() == '.') name.pop_back();  // "localhost." is localhost
    if (name == "localhost") return true;
    for (const auto& a : policy.allowed)
        if (ascii_lower(a) == name) return true;
    const auto ip = parse_ip(name);
    if (!ip) return false;
    std::string bound = policy.bound;
    if (bound.size() >= 2 && bound.front() == '[' && bound.back() == ']') bound = bound.substr(1, bound.size() - 2);
    if (bound == "localhost") bound = "127.0.0.1";
    const auto b = parse_ip(bound);
    if (!b) return false;
    return is_wildcard(*b) || *b == *ip;
}

bool origin_allowed(const HostPolicy& policy, std::string_view origin) {
    const size_t scheme = origin.find("://");
    if (scheme == std::string_view::npos) return false;
    const std::string s = ascii_lower(origin.substr(0, scheme));
    if (s != "http" && s != "https") return false;
    std::string_view rest = origin.substr(scheme + 3);
    if (const size_t slash = rest.find('/'); slash != std::string_view::npos) rest = rest.substr(0, slash);
    return host_allowed(policy, rest);
}

}  // namespace ds4::server
