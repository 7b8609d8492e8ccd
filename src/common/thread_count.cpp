#include "common/thread_count.h"

#include <algorithm>
#include <thread>

#include "common/error.h"

namespace ds4 {

int hardware_threads() { return int(std::max(1u, std::thread::hardware_concurrency())); }

int max_threads() { return 4 * hardware_threads(); }

std::string thread_count_error(int64_t requested) {
    if (requested >= 0 && requested <= max_threads()) return {};
    return fmt::format("must be 0 (all {} hardware threads) or 1 to {} (4 x the hardware "
                       "threads), got {}", hardware_threads(), max_threads(), requested);
}

int resolve_threads(int64_t requested, const char* flag) {
    if (const std::string e = thread_count_error(requested); !e.empty()) fail("{}: {}", flag, e);
    return requested == 0 ? hardware_threads() : int(requested);
}

}  // namespace ds4
