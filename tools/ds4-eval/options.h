// Command-line options of ds4-eval (docs/EVAL.md, spec/PRODUCT.md §3.6): every runtime flag
// ds4 takes (frontend::ModelOptions: -m -t -c --prefill-chunk --no-qat --no-mmap
// --warm-weights, SSD streaming, the pipeline coordinator, steering; speculative decoding) plus
// the runner's own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/conversation.h"
#include "frontend/model_options.h"
#include "speculative/options.h"

namespace ds4::eval_cli {

struct Options : frontend::ModelOptions {
    speculative::SpecOptions spec;
    // Cases.
    std::string cases;                  // --cases FILE ("": the built-in set)
    std::string suite = "all";          // --suite NAME
    std::vector<std::string> case_ids;  // --case-id ID (repeatable)
    int questions = 0;                  // --questions N (0: all)
    std::string case_sequence;          // --case-sequence LIST
    bool list_cases = false, validate_cases = false, dump_cases = false;
    // Generation.
    int64_t max_tokens = 16000;         // -n
    chat::ThinkingMode thinking = chat::ThinkingMode::High;
    int64_t soft_budget = 1024, hard_budget = 512;  // resolved against -n (options.cpp)
    int close_rank = 3;
    float temperature = 0;
    std::optional<float> top_p, min_p;
    int top_k = 0;
    std::optional<uint64_t> seed;
    std::string system;                 // --system TEXT (-sys)
    // Output.
    std::string trace, regrade_trace, json_report;
    bool plain = false;
    int pause_ms = 350;
    int power = 100;                    // --power N
    bool self_test = false;
    std::string script_replies;         // --script-replies FILE (test hook)
};

struct ParseResult {
    Options options;
    std::optional<int> exit_code;
};
ParseResult parse_options(int argc, char** argv);

}  // namespace ds4::eval_cli
