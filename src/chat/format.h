// A model family's chat text format: how a conversation becomes prompt text, which marker
// tokens it uses, and how the model's output splits into reasoning, content and tool calls.
// Everything above the tokenizer that depends on the text format goes through this interface
// (server request rendering and output parsing, the disk cache's chat anchor, the CLI prompt),
// so a second family plugs in a second format without touching the first.
//
// A format is bound to the tokenizer of its model: its marker ids are resolved (and checked)
// through the tokenizer when it is made. The formats this build knows are chosen by the GGUF's
// general.architecture (format.cpp holds the table): "deepseek4" -> DeepSeek V4 with DSML tool
// calls (chat/deepseek4_format.h); "glm-dsa" -> GLM 5.2 with <tool_call> tool calls
// (chat/glm_format.h). Thread-safe: every method is const, parsers are per reply.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/conversation.h"
#include "chat/message.h"
#include "chat/output.h"
#include "chat/tool_tracker.h"

namespace ds4::gguf {
class File;
}
namespace ds4::tokenizer {
class Tokenizer;
}

namespace ds4::chat {

// The token ids of a format's markers (-1: the format has no such marker).
struct MarkerIds {
    int32_t bos = -1;        // opens the prompt
    int32_t eos = -1;        // closes an assistant turn
    int32_t user = -1;       // opens a user turn (the disk cache's chat anchor, server/kv_policy.h)
    int32_t assistant = -1;  // opens an assistant turn
    int32_t think = -1;      // opens the reasoning
    int32_t think_end = -1;  // closes the reasoning
    int32_t tool = -1;       // the tool-call syntax's marker (V4: ｜DSML｜)
};

// The sampling a family is served with unless the user sets it (spec/PRODUCT.md §9.1: upstream's
// DeepSeek defaults T = 1, top-p = 1, min-p = 0.05; GLM's T = 1, top-p = 0.95, min-p = 0).
// The front ends own the sampler: they read these where a flag or request field is unset.
struct SamplingDefaults {
    float temperature = 1.0f;
    float top_p = 1.0f;
    float min_p = 0.05f;
};

// The metadata a format is chosen by.
struct FormatKey {
    std::string architecture;   // general.architecture
    std::string chat_template;  // tokenizer.chat_template; empty when absent
};

class ChatFormat {
public:
    // The format of the model in `file`, bound to `tok` (the file's tokenizer). Throws
    // ds4::Error naming the file and the architecture when no known format fits, or naming a
    // marker the format needs that the vocabulary lacks.
    static std::unique_ptr<ChatFormat> from_gguf(const gguf::File& file, const tokenizer::Tokenizer& tok);
    // The same from the metadata alone; errors name `key.architecture`.
    static std::unique_ptr<ChatFormat> select(const FormatKey& key, const tokenizer::Tokenizer& tok);
    // The architectures with a format, comma-separated (for messages).
    static std::string known_architectures();

    virtual ~ChatFormat() = default;
    ChatFormat(const ChatFormat&) = delete;
    ChatFormat& operator=(const ChatFormat&) = delete;

    virtual std::string_view name() const = 0;
    const tokenizer::Tokenizer& tokenizer() const { return tok_; }
    const MarkerIds& markers() const { return markers_; }
    // The tokens that end a reply when sampled (V4: EOS; GLM: <|endoftext|> and the role
    // markers that open the next turn, <|user|> and <|observation|> among them). Generation
    // must stop at every one of them, not only at tokenizer.ggml.eos_token_id.
    const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
    virtual SamplingDefaults sampling_defaults() const = 0;

    // The thinking mode a request for `mode` gets with a context of `context_size` tokens
    // (a format may gate a mode on the context).
    virtual ThinkingMode effective_thinking(ThinkingMode mode, int64_t context_size) const = 0;
    // The prompt of a conversation. Throws ds4::Error on a malformed tools / response-format
    // JSON text.
    virtual RenderedPrompt render(const std::vector<Message>& messages, const RenderOptions& options) const = 0;
    // The reply opening of a forced tool call (tool_choice "required" or a named tool: `tool`,
    // may be empty), appended to `prompt` so the model continues inside a tool-call block; with
    // `thinking` the prompt ends open for reasoning and the opening closes it first. Returns
    // the appended text, which the output parser is shown before the first generated token.
    virtual std::string append_tool_call_opening(RenderedPrompt& prompt, bool thinking,
                                                 std::string_view tool) const = 0;
    // The text that follows a generated reply (as sampled, without its end marker) to close it
    // and ask the next user message `user`, ending with the generation prompt for `mode`.
    virtual RenderedPrompt next_user_turn(std::string_view user, ThinkingMode mode) const = 0;
    // The canonical tool-call text of an assistant turn's calls (empty for none).
    virtual std::string render_tool_calls(const std::vector<ToolCall>& calls) const = 0;

    // The prompt's token ids: markers only from the trusted text (chat/prompt_tokens.h).
    std::vector<int32_t> tokenize(const RenderedPrompt& prompt) const;

    // A streaming parser for one reply, and the authoritative parse of a whole reply (no end
    // marker text). With options {thinking = false, tools = true}, parse() of a bare tool-call
    // block gives its calls and no content (exact tool replay checks a block so).
    virtual std::unique_ptr<StreamParser> new_parser(OutputParserOptions options) const = 0;
    virtual ParsedOutput parse(std::string_view text, OutputParserOptions options) const = 0;
    // The tracker that tells DSML-aware sampling where a reply stands in a tool call
    // (chat/tool_tracker.h; `thinking`: the reply starts inside its reasoning). Null: the
    // format has none, and every token keeps the request's sampling.
    virtual std::unique_ptr<ToolTracker> new_tool_tracker(bool /*thinking*/) const { return nullptr; }

protected:
    explicit ChatFormat(const tokenizer::Tokenizer& tok) : tok_(tok) {}

    // The id of marker `text`, which must be an added (CONTROL or USER_DEFINED) token so that
    // rendered text tokenizes it as one id; throws ds4::Error naming the marker otherwise.
    int32_t require_marker(std::string_view text) const;

    const tokenizer::Tokenizer& tok_;
    MarkerIds markers_;
    std::vector<int32_t> stop_ids_;
};

}  // namespace ds4::chat
