#include "streaming/full_layers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "common/error.h"

namespace ds4::streaming {
namespace {

constexpr uint64_t kBlock = 4096;

const char* part_name(size_t k) { return k == 0 ? "gate" : k == 1 ? "up" : "down"; }

}  // namespace

FullLayersRequest parse_full_layers(const std::string& text) {
    if (text == "auto") return {.automatic = true};
    int64_t n = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n < 0)
        fail("--ssd-streaming-full-layers {}: expected a layer count >= 0 or auto", text);
    return {.layers = n};
}

std::string full_layers_error(const std::string& text) {
    try {
        parse_full_layers(text);
        return {};
    } catch (const Error&) {
        return "expected a layer count >= 0 or auto";
    }
}

int64_t resolve_full_layers(const FullLayersRequest& req, int64_t budget_slots, uint64_t slot_bytes,
                            uint64_t layer_bytes, int64_t n_routed, int64_t n_expert) {
    if (!req.automatic) return std::min(req.layers, n_routed);
    if (budget_slots >= n_expert * n_routed) return n_routed;
    if (layer_bytes == 0) return 0;
    const int64_t spare = budget_slots - 2 * n_expert;  // the cache keeps two layers' experts
    if (spare <= 0) return 0;
    return std::min(n_routed, int64_t(uint64_t(spare) * slot_bytes / layer_bytes));
}

std::vector<uint32_t> routed_layers(const model::ExpertFileLayout& layout) {
    std::vector<uint32_t> out;
    for (uint32_t il = 0; il < layout.layers.size(); ++il)
        if (layout.layers[il].held) out.push_back(il);
    return out;
}

model::ExpertFileLayout without_layers(model::ExpertFileLayout layout, std::span<const uint32_t> layers) {
    for (uint32_t il : layers)
        if (il < layout.layers.size()) layout.layers[il].held = false;
    return layout;
}

FullLayers::FullLayers(const model::ExpertFileLayout& layout, std::vector<uint32_t> layers,
                       std::shared_ptr<model::ExpertSource> inner)
    : layout_(layout), layers_(std::move(layers)), full_(layout.layers.size(), 0),
      mem_(layout.layers.size(), {nullptr, nullptr, nullptr}), mem_bytes_(layout.layers.size(), {0, 0, 0}),
      inner_(std::move(inner)) {
    const int fd = ::open(layout_.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("{}: --ssd-streaming-full-layers: cannot open: {}", layout_.path, std::strerror(errno));
    try {
        for (uint32_t il : layers_) {
            if (il >= layout_.layers.size() || !layout_.layers[il].held)
                fail("--ssd-streaming-full-layers: layer {} has no routed experts", il);
            full_[il] = 1;
            for (size_t k = 0; k < 3; ++k) {
                const model::ExpertTensorFile& p = layout_.layers[il].parts[k];
                const uint64_t len = uint64_t(layout_.n_expert) * p.expert_bytes, lead = p.offset % kBlock;
                // The file's alignment within a block, as in a mapping and in the cache's slots.
                const size_t size = size_t((lead + len + kBlock - 1) / kBlock * kBlock);
                void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (m == MAP_FAILED)
                    fail("--ssd-streaming-full-layers: cannot reserve {} bytes for layer {}", size, il);
                mem_[il][k] = static_cast<uint8_t*>(m);
                mem_bytes_[il][k] = size;
                uint8_t* dst = mem_[il][k] + lead;
                for (uint64_t done = 0; done < len;) {
                    const ssize_t r = ::pread(fd, dst + done, size_t(len - done), off_t(p.offset + done));
                    if (r < 0 && errno == EINTR) continue;
                    if (r <= 0)
                        fail("{}: layer {}: reading its {} experts ({} bytes at byte {}) failed at byte {}: {}",
                             layout_.path, il, part_name(k), len, p.offset, p.offset + done,
                             r < 0 ? std::strerror(errno) : "unexpected end of file");
                    done += uint64_t(r);
                }
                bytes_ += len;
            }
        }
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
}

FullLayers::~FullLayers() {
    for (size_t il = 0; il < mem_.size(); ++il)
        for (size_t k = 0; k < 3; ++k)
            if (mem_[il][k]) ::munmap(mem_[il][k], mem_bytes_[il][k]);
}

void FullLayers::prepare(uint32_t layer, std::span<const int32_t> experts, std::span<const int32_t> rows) {
    if (full(layer)) return;
    if (!inner_) fail("expert source: layer {} has no routed experts", layer);
    inner_->prepare(layer, experts, rows);
}

model::ExpertWeights FullLayers::expert(uint32_t layer, int32_t e) const {
    if (!full(layer)) {
        if (!inner_) fail("expert source: layer {} has no routed experts", layer);
        return inner_->expert(layer, e);
    }
    if (e < 0 || e >= layout_.n_expert) fail("expert source: no layer {} expert {}", layer, e);
    ops::Matrix m[3];
    for (size_t k = 0; k < 3; ++k) {
        const model::ExpertTensorFile& p = layout_.layers[layer].parts[k];
        const uint8_t* base = mem_[layer][k] + p.offset % kBlock + uint64_t(e) * p.expert_bytes;
        m[k] = ops::Matrix{p.type, p.rows_per_expert, p.cols, base, p.row_bytes};
    }
    return {m[0], m[1], m[2]};
}

void FullLayers::release(uint32_t layer) {
    if (!full(layer) && inner_) inner_->release(layer);
}

size_t FullLayers::capacity() const { return inner_ ? inner_->capacity() : ExpertSource::capacity(); }

void FullLayers::hint(uint32_t layer, std::span<const int32_t> experts) {
    if (!full(layer) && inner_) inner_->hint(layer, experts);
}

}  // namespace ds4::streaming
