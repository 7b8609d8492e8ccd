#include "aid_drafter.h"

#include "common/error.h"

namespace ds4::bench {
namespace {

// splitmix64's finalizer: a well-mixed 64-bit value of the position.
uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}  // namespace

AidDrafter::AidDrafter(std::vector<int32_t> continuation, int64_t start, double accept, int64_t n_vocab)
    : cont_(std::move(continuation)), start_(start), accept_(accept), n_vocab_(n_vocab) {
    if (!(accept >= 0 && accept <= 1)) fail("--spec-aid-accept {} is not in [0, 1]", accept);
    if (n_vocab < 2) fail("--spec-aid needs a vocabulary of at least 2 tokens (got {})", n_vocab);
}

int32_t AidDrafter::draft_at(int64_t p) const {
    const int32_t truth = cont_[size_t(p - start_)];
    const uint64_t h = mix(uint64_t(p));
    // The top 53 bits as a uniform double in [0, 1): wrong when it falls at or above accept.
    const double u = double(h >> 11) * 0x1.0p-53;
    if (u < accept_) return truth;
    const int64_t shift = 1 + int64_t(mix(h) % uint64_t(n_vocab_ - 1));  // never 0: never the truth
    return int32_t((truth + shift) % n_vocab_);
}

engine::Draft AidDrafter::propose(std::span<const int32_t> history, int32_t next, int max) {
    const int64_t p = int64_t(history.size());  // the position of `next`
    const int64_t i = p - start_, n = int64_t(cont_.size());
    if (i < 0 || i >= n || cont_[size_t(i)] != next) return {};
    engine::Draft d;
    for (int64_t q = p + 1; q < start_ + n && int64_t(d.tokens.size()) < max; ++q) d.tokens.push_back(draft_at(q));
    return d;
}

}  // namespace ds4::bench
