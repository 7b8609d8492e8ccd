// TEST HOOK (ds4-server --test-force-output FILE; docs/SERVER.md): scripted model output so
// reasoning, tool calls and every API's event shapes can be tested end to end with a
// random-weight model. FILE is a JSON array of strings; each request takes the next one,
// tokenized with markers matched (so "<think>", "</think>" and the DSML marker become their
// control tokens), and the engine emits exactly those ids (engine::GenerateOptions::forced;
// the model still evaluates them). Once the list is used up, requests sample normally.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace ds4::tokenizer {
class Tokenizer;
}

namespace ds4::server {

class ForcedOutputs {
public:
    // Throws ds4::Error naming the file when it cannot be read or is not an array of strings.
    ForcedOutputs(const std::string& path, const tokenizer::Tokenizer& tok);
    std::optional<std::vector<int32_t>> next();

private:
    std::mutex mutex_;
    std::vector<std::vector<int32_t>> outputs_;
    size_t next_ = 0;
};

}  // namespace ds4::server
