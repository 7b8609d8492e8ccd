// Token-id files (ds4 --token-ids, ds4-bench --token-ids): whitespace-separated non-negative
// ids, used as they are (no BOS, no template).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds4::frontend {

// Throws ds4::Error naming the file and the offending word (or an empty file).
std::vector<int32_t> read_token_ids(const std::string& path);

}  // namespace ds4::frontend
