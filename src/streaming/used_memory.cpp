#include "streaming/used_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "common/log.h"
#include "model/context_check.h"

namespace ds4::streaming {
namespace {

constexpr double kGiB = double(uint64_t(1) << 30);

// GiB asked for; NaN when `spec` is not a size.
double gib_of(const std::string& spec) {
    std::string s = spec;
    for (const char* tail : {"GB", "gb", "GiB", "G", "g"})
        if (s.size() > std::strlen(tail) && s.ends_with(tail)) {
            s.resize(s.size() - std::strlen(tail));
            break;
        }
    if (s.empty() || s.find_first_not_of("0123456789.") != std::string::npos) return NAN;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    return end && *end == '\0' && std::isfinite(v) && v >= 0 ? v : NAN;
}

}  // namespace

UsedMemory::~UsedMemory() { ::munmap(p_, bytes_); }

std::string used_memory_error(const std::string& spec) {
    const double g = gib_of(spec);
    if (std::isnan(g)) return "--simulate-used-memory " + spec + ": expected N or NGB (GiB), e.g. 8 or 0.5GB";
    if (g > 1 << 20) return "--simulate-used-memory " + spec + ": more than 1 PiB";
    return "";
}

std::unique_ptr<UsedMemory> simulate_used_memory(const std::string& spec, const char* tool) {
    if (spec.empty()) return nullptr;
    if (const std::string e = used_memory_error(spec); !e.empty()) fail("{}", e);
    const uint64_t page = 4096;
    const uint64_t bytes = (uint64_t(gib_of(spec) * kGiB) + page - 1) / page * page;
    if (bytes == 0) return nullptr;
    const int64_t avail = model::available_memory();
    if (avail >= 0 && int64_t(bytes) > avail - int64_t(kGiB))
        fail("--simulate-used-memory {}: {:.2f} GiB would leave less than 1 GiB of the {:.2f} GiB available",
             spec, double(bytes) / kGiB, double(avail) / kGiB);
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail("--simulate-used-memory {}: cannot map {} bytes: {}", spec, bytes, std::strerror(errno));
    // mlock faults every page in and keeps it out of swap: it is used memory, as a smaller
    // machine's would be.
    if (::mlock(p, bytes) != 0) {
        const int e = errno;
        ::munmap(p, bytes);
        fail("--simulate-used-memory {}: cannot lock {:.2f} GiB: {} (the limit is `ulimit -l`; raise it, or "
             "run with CAP_IPC_LOCK)", spec, double(bytes) / kGiB, std::strerror(e));
    }
    log::info("{}: --simulate-used-memory: holding {:.2f} GiB locked; {:.2f} GiB available now", tool,
              double(bytes) / kGiB, double(model::available_memory()) / kGiB);
    return std::unique_ptr<UsedMemory>(new UsedMemory(p, bytes));
}

}  // namespace ds4::streaming
