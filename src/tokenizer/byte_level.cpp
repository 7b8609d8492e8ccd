#include "tokenizer/byte_level.h"

#include <array>

namespace ds4::tokenizer {

namespace {

bool maps_to_itself(uint32_t b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Table {
    std::array<uint32_t, 256> to_cp{};
    Table() {
        uint32_t next = 0x100;
        for (uint32_t b = 0; b < 256; ++b) to_cp[b] = maps_to_itself(b) ? b : next++;
    }
};

const Table& table() {
    static const Table t;
    return t;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return table().to_cp[b]; }

int codepoint_to_byte(uint32_t cp) {
    if (cp < 0x100) return maps_to_itself(cp) ? int(cp) : -1;
    if (cp >= 0x100 && cp < 0x100 + 68) {
        // The 68 remapped bytes in increasing order.
        uint32_t k = cp - 0x100;
        for (uint32_t b = 0; b < 256; ++b) {
            if (maps_to_itself(b)) continue;
            if (k-- == 0) return int(b);
        }
    }
    return -1;
}

}  // namespace ds4::tokenizer
