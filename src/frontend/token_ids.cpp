#include "frontend/token_ids.h"

#include <fstream>
#include <limits>

#include "common/error.h"

namespace ds4::frontend {

std::vector<int32_t> read_token_ids(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail("cannot read token ids from {}", path);
    std::vector<int32_t> ids;
    std::string word;
    while (in >> word) {
        size_t used = 0;
        long long v = -1;
        try {
            v = std::stoll(word, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != word.size() || v < 0 || v > std::numeric_limits<int32_t>::max())
            fail("{}: '{}' (token {}) is not a token id", path, word, ids.size());
        ids.push_back(int32_t(v));
    }
    if (ids.empty()) fail("{}: no token ids", path);
    return ids;
}

}  // namespace ds4::frontend
