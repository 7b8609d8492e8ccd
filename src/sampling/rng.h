// The sampler's PRNG: a seed gives the same tokens on every platform (common/xoshiro.h).
#pragma once

#include "common/xoshiro.h"

namespace ds4::sampling {
using Rng = Xoshiro256;
}  // namespace ds4::sampling
