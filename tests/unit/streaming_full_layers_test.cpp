// --ssd-streaming-full-layers (src/streaming/full_layers.h): the flag's syntax and how many
// routed layers a request keeps in memory out of a budget.
#include <gtest/gtest.h>

#include "common/error.h"
#include "streaming/full_layers.h"

namespace ds4::streaming {
namespace {

TEST(StreamingFullLayers, Syntax) {
    EXPECT_TRUE(parse_full_layers("auto").automatic);
    EXPECT_EQ(parse_full_layers("0").layers, 0);
    EXPECT_EQ(parse_full_layers("75").layers, 75);
    for (const char* bad : {"", "-1", "x", "2.5", "3 ", "1e3", "AUTO"}) {
        EXPECT_THROW(parse_full_layers(bad), Error) << bad;
        EXPECT_FALSE(full_layers_error(bad).empty()) << bad;
    }
    EXPECT_TRUE(full_layers_error("12").empty());
}

TEST(StreamingFullLayers, Resolution) {
    // GLM 5.2's shape: 75 routed layers of 256 experts of ~15 MiB (slot a bit larger).
    const uint64_t expert = 15u << 20, slot = expert + (64u << 10), layer = 256 * expert;
    const int64_t E = 256, L = 75;
    // Explicit N: as asked, capped at the routed layers.
    EXPECT_EQ(resolve_full_layers({.layers = 3}, 1000, slot, layer, L, E), 3);
    EXPECT_EQ(resolve_full_layers({.layers = 0}, 1000, slot, layer, L, E), 0);
    EXPECT_EQ(resolve_full_layers({.layers = 500}, 1000, slot, layer, L, E), L);
    // Auto: everything when the budget holds every expert...
    EXPECT_EQ(resolve_full_layers({.automatic = true}, E * L, slot, layer, L, E), L);
    // ... else the layers that leave two layers' experts to the cache.
    EXPECT_EQ(resolve_full_layers({.automatic = true}, 2 * E, slot, layer, L, E), 0);
    EXPECT_EQ(resolve_full_layers({.automatic = true}, 2 * E - 1, slot, layer, L, E), 0);
    EXPECT_EQ(resolve_full_layers({.automatic = true}, 3 * E, slot, layer, L, E), 1);  // slot > expert
    EXPECT_EQ(resolve_full_layers({.automatic = true}, 2 * E + 10 * E, slot, layer, L, E), 10);
}

}  // namespace
}  // namespace ds4::streaming
