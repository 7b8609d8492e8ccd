// One request on its way to the engine: the tokenized prompt, what to generate, how to report
// it (the API writer) and where to put the bytes (the channel).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/conversation.h"
#include "server/channel.h"
#include "server/request.h"
#include "server/response_store.h"
#include "server/tool_memory.h"
#include "server/writer.h"

namespace ds4::server {

struct Job {
    Request request;
    chat::RenderedPrompt rendered;  // the prompt's text (the disk cache's key) and untrusted spans
    std::vector<int32_t> prompt;    // its tokens
    bool thinking = true;          // the prompt ends with <｜Assistant｜><think>
    int64_t max_tokens = 0;        // output limit (also capped by the context)
    // The reply's first bytes, already at the end of `prompt` (a forced tool choice's DSML
    // opening, chat::append_tool_call_opening): run_job shows them to the output parser and
    // the final text before the first generated token, so the writers report a tool call.
    std::string reply_prefix;
    // Exact tool replay (null: off): run_job remembers each tool call id of the reply with
    // the DSML text it sampled (ToolMemory; outlives the job).
    ToolMemory* tool_memory = nullptr;
    // Replies kept for previous_response_id and live continuations (null: none; outlives the
    // job): run_job stores the finished turn under its response id and call ids.
    ResponseStore* responses = nullptr;
    std::optional<std::vector<int32_t>> forced;  // test hook: emit these ids
    std::unique_ptr<ApiWriter> writer;
    std::shared_ptr<Channel> channel;
    std::chrono::steady_clock::time_point enqueued;
};

}  // namespace ds4::server
