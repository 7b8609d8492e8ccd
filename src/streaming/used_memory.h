// `--simulate-used-memory NGB` (spec/PRODUCT.md §6): before the model loads, lock N GiB of
// memory for the life of the process, so a big machine behaves like a smaller one: the memory
// checks, `--ssd-streaming-cache-experts auto` and the kernel's page cache all see N GiB fewer
// (/proc/meminfo's MemAvailable drops by them). For measuring SSD streaming and the memory
// refusals without another machine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace ds4::streaming {

// Pages mapped, touched and mlock()ed until destruction.
class UsedMemory {
public:
    ~UsedMemory();
    UsedMemory(const UsedMemory&) = delete;
    UsedMemory& operator=(const UsedMemory&) = delete;
    uint64_t bytes() const { return bytes_; }

private:
    friend std::unique_ptr<UsedMemory> simulate_used_memory(const std::string&, const char*);
    UsedMemory(void* p, uint64_t n) : p_(p), bytes_(n) {}
    void* p_;
    uint64_t bytes_;
};

// "" when `spec` is a size: N or NGB (GiB, N a positive decimal, e.g. 8, 0.5GB, 12G), else
// what is wrong with it (for the flag's check).
std::string used_memory_error(const std::string& spec);

// Takes what `spec` asks for ("" or "0": nothing, nullptr). Throws ds4::Error when it would leave
// less than 1 GiB available, or the pages cannot be locked (RLIMIT_MEMLOCK without
// CAP_IPC_LOCK: the message says how to raise it). Logs one line naming `tool`.
std::unique_ptr<UsedMemory> simulate_used_memory(const std::string& spec, const char* tool);

}  // namespace ds4::streaming
