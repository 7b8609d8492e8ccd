#include "server/ids.h"

#include <mutex>
#include <random>

namespace ds4::server {

std::string random_hex(size_t n_bytes) {
    // One device for the process; random_device::operator() is not guaranteed thread-safe.
    static std::mutex mutex;
    static std::random_device device;
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * n_bytes);
    std::lock_guard lock(mutex);
    for (size_t i = 0; i < n_bytes; i += 4) {
        uint32_t v = device();
        for (size_t k = 0; k < 4 && i + k < n_bytes; ++k, v >>= 8) {
            out += digits[(v >> 4) & 15];
            out += digits[v & 15];
        }
    }
    return out;
}

std::string openai_call_id() { return "call_" + random_hex(16); }
std::string anthropic_tool_id() { return "toolu_" + random_hex(16); }
std::string responses_id(std::string_view prefix) { return std::string(prefix) + random_hex(12); }

}  // namespace ds4::server
