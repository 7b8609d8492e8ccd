// `--script-replies FILE` (the test hook of ds4-agent and ds4-eval): the model's replies to force
// instead of sampling, as a JSON array of strings.
#pragma once

#include <string>
#include <vector>

namespace ds4::frontend {

// Throws ds4::Error naming the flag and `path` when the file is not a JSON array of strings.
std::vector<std::string> read_script_replies(const std::string& path);

}  // namespace ds4::frontend
