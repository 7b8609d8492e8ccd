// Unguessable identifiers (spec/PRODUCT.md §4.7, §4.9): tool-call ids are a client-visible handle
// the next request sends back, so they come from the OS CSPRNG (std::random_device reads
// /dev/urandom or the CPU's RNG on Linux), never from a counter or a seeded generator.
#pragma once

#include <string>
#include <string_view>

namespace ds4::server {

// `n_bytes` random bytes as lowercase hex (2 * n_bytes digits).
std::string random_hex(size_t n_bytes);

// "call_" + 32 hex digits (OpenAI chat and Responses call_id).
std::string openai_call_id();
// "toolu_" + 32 hex digits (Anthropic tool_use id).
std::string anthropic_tool_id();
// prefix + 24 hex digits: Responses object ids ("resp_", "rs_", "msg_", "fc_").
std::string responses_id(std::string_view prefix);

}  // namespace ds4::server
