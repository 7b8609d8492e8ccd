// The tiny real-vocabulary model the model, CLI and server tests run on: ds4-gguf-gen's tiny
// preset with the real DeepSeek V4 vocabulary, tokenizer and chat template (random weights),
// the same file `scripts/run-default.sh` writes as the default model.
#pragma once

#include <string>
#include <vector>

#include "support/tool_run.h"

namespace ds4::test {

// Extra generator flags of the CLI and server tests' variant: Q8_0 embedding and output, so
// the 129k-row vocabulary tensors stay small.
inline const std::vector<std::string> kTinyQ8Io = {"--type", "embd=q8_0", "--type", "output=q8_0"};

// The context the default model declares (scripts/run-default.sh: coding agents' 7-12k-token
// prompts must fit).
inline constexpr const char* kDefaultModelCtx = "65536";

// Runs `ds4-gguf-gen -q --preset tiny --real-vocab [--ctx 65536] EXTRA... -o path` (--ctx
// unless EXTRA has one) and returns its result (exit code 0 on success, the generator's output
// otherwise).
RunResult write_tiny_model(const std::string& path, const std::vector<std::string>& extra = {});

// Writes `ds4-gguf-gen -q -o DIR/NAME ARGS...` and returns the path; throws ds4::Error with the
// generator's output when it fails.
std::string generate_model(const TempDir& dir, const std::string& name, const std::vector<std::string>& args);

}  // namespace ds4::test
