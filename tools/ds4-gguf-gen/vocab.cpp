#include "vocab.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "common/error.h"
#include "gguf/writer.h"

namespace ds4::gen {

namespace {

// Tokens V4 added after the V3 ids, at their V4 ids (spec/TOKENIZER_CHAT.md §1.2, §5.1). The
// other ids >= 128815 are unknown and stay UNUSED.
struct V4Token {
    uint32_t id;
    const char* text;
};
constexpr V4Token kV4Tokens[] = {
    {128821, "<think>"},
    {128822, "</think>"},
    {128825, "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c"},  // ｜DSML｜
    {128828, "<\xef\xbd\x9c" "latest_reminder" "\xef\xbd\x9c>"},  // <｜latest_reminder｜>
};

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
    return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// llama.cpp's converter marks added tokens CONTROL when flagged special or when they look
// like <|…|> / <｜…｜>; the others are USER_DEFINED.
bool looks_special(const std::string& t) {
    return (starts_with(t, "<|") && ends_with(t, "|>")) ||
           (starts_with(t, "<\xef\xbd\x9c") && ends_with(t, "\xef\xbd\x9c>"));
}

// USER_DEFINED tokens are stored pre-normalised: the converter turns U+2581 into a space.
std::string user_defined_text(std::string t) {
    const std::string lower_one_eighth_block = "\xe2\x96\x81";
    for (size_t p; (p = t.find(lower_one_eighth_block)) != std::string::npos;)
        t.replace(p, lower_one_eighth_block.size(), " ");
    return t;
}

}  // namespace

Vocab load_deepseek_vocab(const std::string& path, uint32_t n_vocab) {
    if (n_vocab < kRealVocabMinSize)
        fail("real vocabulary needs vocab size >= {} (its highest id is {}), got {}",
             kRealVocabMinSize, kRealVocabMinSize - 1, n_vocab);
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("{}: cannot open tokenizer.json", path);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
        fail("{}: not valid JSON: {}", path, e.what());
    }

    Vocab v;
    v.tokens.assign(n_vocab, {});
    v.types.assign(n_vocab, kUnused);
    std::vector<bool> set(n_vocab, false);
    try {
        const auto& model = j.at("model");
        if (model.at("type").get<std::string>() != "BPE")
            fail("{}: model.type is not BPE", path);
        for (const auto& [text, idj] : model.at("vocab").items()) {
            const int64_t id = idj.get<int64_t>();
            if (id < 0 || id >= int64_t(n_vocab))
                fail("{}: vocab entry '{}' has id {} outside [0, {})", path, text, id, n_vocab);
            v.tokens[size_t(id)] = text;
            v.types[size_t(id)] = kNormal;
            set[size_t(id)] = true;
        }
        for (const auto& a : j.at("added_tokens")) {
            const int64_t id = a.at("id").get<int64_t>();
            std::string text = a.at("content").get<std::string>();
            if (id < 0 || id >= int64_t(n_vocab))
                fail("{}: added token '{}' has id {} outside [0, {})", path, text, id, n_vocab);
            const bool control = a.value("special", false) || looks_special(text);
            v.tokens[size_t(id)] = control ? text : user_defined_text(text);
            v.types[size_t(id)] = control ? kControl : kUserDefined;
            set[size_t(id)] = true;
        }
        // Merges are "a b" strings, or [a, b] pairs in newer tokenizer.json files.
        for (const auto& m : model.at("merges")) {
            if (m.is_string())
                v.merges.push_back(m.get<std::string>());
            else
                v.merges.push_back(m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
        }
    } catch (const nlohmann::json::exception& e) {
        fail("{}: unexpected tokenizer.json structure: {}", path, e.what());
    }
    for (const V4Token& t : kV4Tokens) {
        if (set[t.id] && v.tokens[t.id] != t.text)
            fail("{}: id {} is '{}' but V4 puts '{}' there", path, t.id, v.tokens[t.id], t.text);
        v.tokens[t.id] = t.text;
        v.types[t.id] = looks_special(t.text) ? kControl : kUserDefined;
        set[t.id] = true;
    }
    for (uint32_t id = 0; id < n_vocab; ++id)
        if (!set[id]) v.tokens[id] = "[PAD" + std::to_string(id) + "]";
    return v;
}

std::string default_tokenizer_json() {
    namespace fs = std::filesystem;
    if (const char* env = std::getenv("DS4_TOKENIZER_JSON"); env && *env) return env;
    const fs::path rel = fs::path(".cache") / "oracle" / "tokenizer" / "models" / "tokenizer.json";
    std::vector<fs::path> roots = {fs::current_path()};
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        // An installed package keeps it in PREFIX/share/dwarfstar beside PREFIX/bin.
        const fs::path installed = exe.parent_path().parent_path() / "share" / "dwarfstar" / "tokenizer.json";
        if (fs::exists(installed, ec)) return installed.string();
        roots.push_back(exe.parent_path());  // build-*/bin
    }
    for (fs::path dir : roots) {
        for (int up = 0; up < 4 && !dir.empty(); ++up, dir = dir.parent_path()) {
            if (fs::exists(dir / rel, ec)) return (dir / rel).string();
            if (dir == dir.parent_path()) break;
        }
    }
    return {};
}

void write_tokenizer_metadata(gguf::Writer& w, const Vocab* vocab) {
    using gguf::Value;
    if (!vocab) {
        w.set("tokenizer.ggml.model", Value::str("none"));
        return;
    }
    w.set("tokenizer.ggml.model", Value::str("gpt2"));
    w.set("tokenizer.ggml.pre", Value::str("joyai-llm"));
    w.set("tokenizer.ggml.tokens", Value::array_str(vocab->tokens));
    w.set("tokenizer.ggml.token_type", Value::array_i32(vocab->types));
    w.set("tokenizer.ggml.merges", Value::array_str(vocab->merges));
    w.set("tokenizer.ggml.bos_token_id", Value::u32(0));
    w.set("tokenizer.ggml.eos_token_id", Value::u32(1));
    w.set("tokenizer.ggml.padding_token_id", Value::u32(1));
    w.set("tokenizer.ggml.add_bos_token", Value::boolean(false));
    w.set("tokenizer.ggml.add_eos_token", Value::boolean(false));
}

}  // namespace ds4::gen
