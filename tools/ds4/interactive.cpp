#include "interactive.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "chat/format.h"
#include "common/error.h"
#include "common/file_io.h"
#include "engine/engine.h"
#include "frontend/startup.h"
#include "generate.h"
#include "kvcache/file_format.h"
#include "line_editor.h"
#include "model/context_check.h"
#include "model/identity.h"
#include "model/model.h"
#include "model/state_file.h"
#include "prompt.h"
#include "tokenizer/tokenizer.h"
#include "turn.h"

namespace ds4::cli {
namespace {

std::atomic<bool> g_busy{false};       // a turn is running: Ctrl+C stops it
std::atomic<bool> g_interrupt{false};  // Ctrl+C arrived during the turn

extern "C" void on_sigint(int) {
    if (g_busy.load()) {
        g_interrupt.store(true);
        return;
    }
    // At the prompt: leave (libedit has already put the terminal back to normal).
    const char nl = '\n';
    (void)!write(STDOUT_FILENO, &nl, 1);
    _exit(130);
}

constexpr const char* kHelp =
    "Commands:\n"
    "  /help        this list\n"
    "  /think       thinking on (the default): reasoning is shown dimmed before the answer\n"
    "  /think-max   maximum reasoning effort (needs a context of at least 393216; from the\n"
    "               next conversation, since its prefix opens the prompt)\n"
    "  /nothink     answer directly, without reasoning\n"
    "  /ctx N       start a new conversation with a context of N tokens\n"
    "  /read FILE   send the text of FILE as the next message\n"
    "  /save FILE   save the conversation (its KV state and text) to FILE\n"
    "  /load FILE   continue a conversation saved with /save (same model; the context must\n"
    "               hold it)\n"
    "  /steer S     the FFN steering scale of every --dir-steering-file, from the next token\n"
    "               on (0: off; the conversation's KV is kept)\n"
    "  /quit, /exit leave (so does Ctrl+D)\n"
    "Ctrl+C stops a reply and returns to the prompt; at the prompt it exits.\n";

const char* mode_name(chat::ThinkingMode m) {
    switch (m) {
        case chat::ThinkingMode::Off: return "off";
        case chat::ThinkingMode::High: return "on";
        case chat::ThinkingMode::Max: return "max";
    }
    return "?";
}

class Chat {
public:
    Chat(const Options& o)
        : o_(o), ctx_(o.ctx), thinking_(o.thinking), run_(frontend::start_model(o, {.tokenizer = true})) {
        format_ = chat::ChatFormat::from_gguf(run_.model->file(), *run_.tokenizer);
        identity_ = model::identity(*run_.model);
        spec_ = speculative::Speculation::open(*run_.model, o.spec);
        if (spec_) std::fprintf(stderr, "ds4: speculative decoding: %s\n", spec_->describe().c_str());
        restart(ctx_);
    }

    int loop() {
        LineEditor input(default_history_path());
        if (input.interactive())
            std::fprintf(stderr,
                         "ds4: chatting with %s (context %lld tokens, thinking %s). /help lists "
                         "commands; Ctrl+C stops a reply, Ctrl+D exits.\n",
                         o_.model.c_str(), (long long)ctx_, mode_name(thinking_));
        while (auto line = input.read("ds4> ")) {
            const std::string text = *line;
            if (text.find_first_not_of(" \t") == std::string::npos) continue;
            input.remember(text);
            if (text[0] == '/') {
                if (!command(text)) break;
            } else {
                turn(text);
            }
        }
        return 0;
    }

private:
    void restart(int64_t ctx) {
        ctx_ = ctx;
        engine_.reset();
        engine_ = std::make_unique<engine::Engine>(
            *run_.model, *run_.tokenizer,
            model::SessionOptions{.ctx = ctx, .prefill_chunk = o_.prefill_chunk, .qat = o_.qat}, format_->stop_ids());
        // The drafter mirrors the session: a new one with each (a /load restarts its window
        // from the rows that follow).
        drafter_.reset();
        if (spec_) {
            drafter_ = spec_->new_drafter({.ctx = ctx, .qat = o_.qat});
            engine_->set_drafter(drafter_.get());
        }
        transcript_.clear();
        if (thinking_ == chat::ThinkingMode::Max &&
            chat::effective_thinking(thinking_, ctx_) != chat::ThinkingMode::Max)
            std::fprintf(stderr, "ds4: think-max needs a context of at least %lld; thinking as "
                                 "/think\n", (long long)chat::kThinkMaxMinContext);
    }

    // /steer S: a copy of the steering with every slot's FFN scale S, for the calls to come.
    void steer(const std::string& arg) {
        // Scales of 0 keep the directions (the edit is skipped), so a later /steer finds them.
        const std::shared_ptr<const model::Steering> loaded = run_.model->steering();
        if (!loaded) {
            std::fprintf(stderr, "ds4: /steer needs --dir-steering-file on the command line\n");
            return;
        }
        float s = 0;
        const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), s);
        if (ec != std::errc() || end != arg.data() + arg.size() || !std::isfinite(s)) {
            std::fprintf(stderr, "usage: /steer S (a number; 0 turns steering off)\n");
            return;
        }
        auto next = std::make_shared<model::Steering>(*loaded);
        for (model::SteeringSlot& slot : next->slots) slot.ffn = s;
        run_.model->set_steering(std::move(next));
        identity_ = model::identity(*run_.model);  // /save marks the state with the steering it runs under
        std::fprintf(stderr, "steering: ffn scale %g\n", double(s));
    }

    // false: leave the chat.
    bool command(const std::string& line) {
        std::istringstream in(line);
        std::string cmd, arg;
        in >> cmd;
        std::getline(in >> std::ws, arg);
        if (cmd == "/quit" || cmd == "/exit") return false;
        if (cmd == "/help") {
            std::fputs(kHelp, stdout);
        } else if (cmd == "/think" || cmd == "/think-max" || cmd == "/nothink") {
            thinking_ = cmd == "/nothink" ? chat::ThinkingMode::Off
                        : cmd == "/think" ? chat::ThinkingMode::High
                                          : chat::ThinkingMode::Max;
            const auto eff = chat::effective_thinking(thinking_, ctx_);
            std::fprintf(stderr, "thinking: %s\n", mode_name(eff));
            if (thinking_ != eff)
                std::fprintf(stderr, "ds4: think-max needs a context of at least %lld (/ctx N)\n",
                             (long long)chat::kThinkMaxMinContext);
        } else if (cmd == "/ctx") {
            long long n = 0;
            const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), n);
            if (ec != std::errc() || end != arg.data() + arg.size() || n < 16) {
                std::fprintf(stderr, "usage: /ctx N (a context size of at least 16 tokens)\n");
            } else {
                try {
                    model::check_trained_context(*run_.model, n, "/ctx");
                    const int64_t old = ctx_;
                    try {
                        restart(n);
                    } catch (const Error&) {
                        restart(old);  // the conversation is gone either way; keep a usable one
                        throw;
                    }
                    std::fprintf(stderr, "new conversation, context %lld tokens\n", n);
                } catch (const Error& e) {
                    std::fprintf(stderr, "ds4: %s\n", e.what());
                }
            }
        } else if (cmd == "/read") {
            if (arg.empty()) {
                std::fprintf(stderr, "usage: /read FILE\n");
                return true;
            }
            std::string text;
            try {
                text = read_file(arg);  // a directory is an error, not an empty message
            } catch (const Error& e) {
                std::fprintf(stderr, "ds4: /read %s\n", e.what());
                return true;
            }
            turn(text);
        } else if (cmd == "/save" || cmd == "/load") {
            if (arg.empty()) {
                std::fprintf(stderr, "usage: %s FILE\n", cmd.c_str());
                return true;
            }
            try {
                cmd == "/save" ? save(arg) : load(arg);
            } catch (const Error& e) {
                std::fprintf(stderr, "ds4: %s %s\n", cmd.c_str(), e.what());
            }
        } else if (cmd == "/steer") {
            steer(arg);
        } else {
            std::fprintf(stderr, "unknown command %s (/help lists them)\n", cmd.c_str());
        }
        return true;
    }

    // The live session in the disk KV cache's file format (docs/KV_CACHE_FORMAT.md): the
    // decoded conversation as its text, the engine's state as its payload.
    void save(const std::string& path) {
        const std::vector<uint8_t> state = engine_->save_state();
        const auto& held = engine_->tokens();
        kvcache::write_file(path, run_.tokenizer->decode(held), state,
                            {kvcache::SaveReason::manual, int64_t(held.size()), ctx_}, {}, identity_,
                            model::kStateVersion);
        std::fprintf(stderr, "saved %zu tokens to %s\n", held.size(), path.c_str());
    }

    // Replaces the conversation with a saved one; on failure the current one stays.
    void load(const std::string& path) {
        const kvcache::Entry e = kvcache::read_file(path, identity_, model::kStateVersion);
        const bool drafter = engine_->load_state(e.payload);
        // The engine's tokens are the conversation: a reply cut by -n may end one sampled
        // token early, which the next turn simply does not see.
        transcript_ = engine_->tokens();
        std::fprintf(stderr, "loaded %zu tokens from %s (context: %lld/%lld tokens%s)\n", transcript_.size(),
                     path.c_str(), (long long)transcript_.size(), (long long)ctx_,
                     drafter ? "; drafter state restored" : "");
    }

    // The transcript with the user's new turn appended: the whole one-turn prompt first, then
    // the format's next user turn (V4: the previous reply's closing EOS and
    // <｜User｜>text<｜Assistant｜><think> or </think>).
    std::vector<int32_t> with_user_turn(const std::string& text, chat::ThinkingMode mode) const {
        if (transcript_.empty())
            return one_turn_tokens(*format_, {.system = o_.system, .prefix = o_.prefix, .user = text,
                                              .thinking = mode, .context_size = ctx_});
        std::vector<int32_t> ids = transcript_;
        const auto suffix = format_->tokenize(format_->next_user_turn(text, mode));
        ids.insert(ids.end(), suffix.begin(), suffix.end());
        return ids;
    }

    void turn(const std::string& text) {
        const auto mode = format_->effective_thinking(thinking_, ctx_);
        const std::vector<int32_t> prompt = with_user_turn(text, mode);
        if (int64_t(prompt.size()) >= ctx_) {
            std::fprintf(stderr, "ds4: this message needs %zu tokens of context but there are %lld "
                                 "(/ctx N starts a new conversation with more)\n",
                         prompt.size(), (long long)ctx_);
            return;
        }
        TurnOptions t;
        t.format = format_.get();
        t.sampling = sampler_params(o_, format_->sampling_defaults());
        if (o_.n_given) t.max_tokens = o_.n_predict;
        if (spec_) t.max_draft = spec_->max_draft();
        t.thinking = mode != chat::ThinkingMode::Off;
        t.cancel = &g_interrupt;
        t.progress = isatty(STDERR_FILENO) != 0;
        g_interrupt = false;
        g_busy = true;
        TurnResult r;
        try {
            r = run_turn(*engine_, prompt, t);
        } catch (const Error& e) {
            g_busy = false;
            std::fprintf(stderr, "ds4: %s\n", e.what());
            return;
        }
        g_busy = false;
        if (!r.prefill_done || (r.generation.reason == engine::StopReason::Cancelled &&
                                r.generation.emitted == 0)) {
            std::fprintf(stderr, "[interrupted: the message was not sent]\n");
            return;  // rolled back: the transcript does not change
        }
        transcript_ = prompt;
        transcript_.insert(transcript_.end(), r.emitted.begin(), r.emitted.end());
        if (r.generation.reason == engine::StopReason::Cancelled) std::fprintf(stderr, "[stopped]\n");
        if (r.generation.reason == engine::StopReason::ContextFull)
            std::fprintf(stderr, "ds4: the context is full (%lld tokens); /ctx N starts a new "
                                 "conversation\n", (long long)ctx_);
        print_speed(r);
        std::fprintf(stderr, "context: %lld/%lld tokens; this turn prefilled %lld, reused %lld\n",
                     (long long)transcript_.size(), (long long)ctx_,
                     (long long)r.prefill.evaluated, (long long)r.prefill.reused);
    }

    const Options& o_;
    int64_t ctx_;
    chat::ThinkingMode thinking_;
    frontend::Started run_;  // the model, its tokenizer, --ssd-streaming / --expert-profile
    std::unique_ptr<chat::ChatFormat> format_;  // bound to *run_.tokenizer
    std::unique_ptr<speculative::Speculation> spec_;  // --mtp
    std::unique_ptr<engine::Drafter> drafter_;        // of engine_'s session
    std::unique_ptr<engine::Engine> engine_;
    std::vector<int32_t> transcript_;  // every token of the conversation so far
    kvcache::ModelId identity_{};      // model::identity, for /save and /load
};

}  // namespace

int run_chat(const Options& o) {
    Chat chat(o);
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    return chat.loop();
}

}  // namespace ds4::cli
