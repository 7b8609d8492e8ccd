#include "server/forced_output.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace ds4::server {

ForcedOutputs::ForcedOutputs(const std::string& path, const tokenizer::Tokenizer& tok) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("test-force-output: cannot read {}", path);
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (!j.is_array()) fail("test-force-output: {} must hold a JSON array of strings", path);
    for (size_t i = 0; i < j.size(); ++i) {
        if (!j[i].is_string()) fail("test-force-output: {} entry {} is not a string", path, i);
        outputs_.push_back(tok.encode(j[i].get<std::string>(), tokenizer::Special::Match));
    }
}

std::optional<std::vector<int32_t>> ForcedOutputs::next() {
    std::lock_guard lock(mutex_);
    if (next_ >= outputs_.size()) return std::nullopt;
    return outputs_[next_++];
}

}  // namespace ds4::server
