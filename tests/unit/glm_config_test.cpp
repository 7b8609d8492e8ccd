// GlmConfig (src/model/glm/config.h): the glm-dsa key set llama.cpp reads, the metadata round trip
// through a real GGUF, llama.cpp's default indexer types, and the errors of from_gguf() (each
// names the file and the offending key).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/glm/config.h"
#include "support/gguf_test_util.h"

namespace ds4::glm {
namespace {

using gguf::Value;
using gguf::ValueType;
using KV = std::vector<std::pair<std::string, Value>>;

std::unique_ptr<gguf::File> write_open(const test::ScratchDir& dir, const KV& kv) {
    const std::string path = dir.file("m.gguf");
    {
        gguf::Writer w(path);
        for (const auto& [k, v] : kv) w.set(k, v);
        w.begin_data();
        w.finish();
    }
    return gguf::File::open(path);
}

KV without(KV kv, const std::string& key) {
    kv.erase(std::remove_if(kv.begin(), kv.end(), [&](const auto& p) { return p.first == key; }), kv.end());
    return kv;
}

KV with(KV kv, const std::string& key, Value v) {
    for (auto& p : kv)
        if (p.first == key) {
            p.second = std::move(v);
            return kv;
        }
    kv.emplace_back(key, std::move(v));
    return kv;
}

GlmConfig load(const KV& kv) {
    test::ScratchDir dir;
    auto f = write_open(dir, kv);
    return GlmConfig::from_gguf(*f);
}

// Expects from_gguf to throw with every fragment in the message.
void expect_error(const KV& kv, const std::vector<std::string>& fragments) {
    try {
        (void)load(kv);
        ADD_FAILURE() << "no error; expected one mentioning " << fragments[0];
    } catch (const Error& e) {
        const std::string msg = e.what();
        for (const auto& frag : fragments)
            EXPECT_NE(msg.find(frag), std::string::npos) << "message: " << msg << "\nmissing: " << frag;
    }
}

const KV& glm52_kv() {
    static const KV kv = GlmConfig::glm52().metadata();
    return kv;
}

std::string k(const std::string& suffix) { return "glm-dsa." + suffix; }

Value bools(const std::vector<uint8_t>& v) {
    std::vector<Value::Scalar> e;
    for (uint8_t b : v) e.emplace_back(bool(b));
    return Value::array(ValueType::BOOL, std::move(e));
}

TEST(GlmConfig, Glm52IsThePublishedShape) {
    const GlmConfig c = GlmConfig::glm52();
    EXPECT_NO_THROW(c.validate());
    EXPECT_EQ(c.n_layer, 78u);
    EXPECT_EQ(c.n_nextn, 1u);
    EXPECT_EQ(c.n_embd, 6144u);
    EXPECT_EQ(c.n_vocab, 154880u);
    EXPECT_EQ(c.n_head, 64u);
    EXPECT_EQ(c.key_dim(), 576u);    // kv_lora 512 + rope 64
    EXPECT_EQ(c.value_dim(), 512u);
    EXPECT_EQ(c.q_head_dim(), 256u);  // key_length_mla
    EXPECT_EQ(c.indexer_heads, 32u);
    EXPECT_EQ(c.indexer_dim, 128u);
    EXPECT_EQ(c.indexer_top_k, 2048u);
    EXPECT_EQ(c.n_dense_lead, 3u);
    EXPECT_EQ(c.n_expert, 256u);
    EXPECT_EQ(c.n_expert_used, 8u);
    EXPECT_FLOAT_EQ(c.expert_weights_scale, 2.5f);
    EXPECT_FLOAT_EQ(c.rope_base, 8e6f);
    EXPECT_EQ(c.context_length, 1u << 20);
    // GLM 5.2's table: layers 0 and 1, then every 4th from 2 (21 full layers of 78).
    ASSERT_EQ(c.indexer_full.size(), 78u);
    EXPECT_EQ(std::count(c.indexer_full.begin(), c.indexer_full.end(), 1), 21);
    for (uint32_t il : {0u, 1u, 2u, 6u, 74u}) EXPECT_TRUE(c.indexer_is_full(il)) << il;
    for (uint32_t il : {3u, 4u, 5u, 7u, 77u}) EXPECT_FALSE(c.indexer_is_full(il)) << il;
    EXPECT_EQ(c.indexer_source(5), 2u);
    EXPECT_EQ(c.indexer_source(6), 6u);
    EXPECT_EQ(c.indexer_source(77), 74u);
    EXPECT_TRUE(c.is_dense(2));
    EXPECT_FALSE(c.is_dense(3));
}

TEST(GlmConfig, DefaultIndexerTypesFollowLlamaCpp) {
    // Below a trained context of 2^20 (GLM 5 / 5.1): every layer full.
    EXPECT_EQ(GlmConfig::default_indexer_types(5, (1u << 20) - 1), std::vector<uint8_t>(5, 1));
    // At 2^20 and above: GLM 5.2's table, 0 past its 78 entries.
    const auto t = GlmConfig::default_indexer_types(84, 1u << 20);
    EXPECT_EQ(std::vector<uint8_t>(t.begin(), t.begin() + 10), (std::vector<uint8_t>{1, 1, 1, 0, 0, 0, 1, 0, 0, 0}));
    EXPECT_EQ(t[74], 1);
    EXPECT_EQ(t[78], 0);
    EXPECT_EQ(t[82], 0);  // (82 - 2) % 4 == 0, but beyond the table

    // A file without attention.indexer.types gets the rule for its context length.
    KV kv = without(glm52_kv(), k("attention.indexer.types"));
    EXPECT_EQ(load(kv).indexer_full, GlmConfig::default_indexer_types(78, 1u << 20));
    kv = with(kv, k("context_length"), Value::u32(202752));  // GLM 5's context
    EXPECT_EQ(load(kv).indexer_full, std::vector<uint8_t>(78, 1));
    // An explicit array wins over the rule; a scalar applies to every layer.
    std::vector<uint8_t> custom(78, 0);
    custom[0] = custom[40] = 1;
    EXPECT_EQ(load(with(kv, k("attention.indexer.types"), bools(custom))).indexer_full, custom);
    EXPECT_EQ(load(with(kv, k("attention.indexer.types"), Value::boolean(true))).indexer_full,
              std::vector<uint8_t>(78, 1));
    // Integer arrays read as bools.
    std::vector<int32_t> ints(78, 0);
    ints[0] = 1, ints[3] = 7;
    const GlmConfig c = load(with(kv, k("attention.indexer.types"), Value::array_i32(ints)));
    EXPECT_TRUE(c.indexer_is_full(3));
    EXPECT_FALSE(c.indexer_is_full(2));
}

TEST(GlmConfig, MetadataIsTheKeySetLlamaCppReads) {
    const KV& kv = glm52_kv();
    std::set<std::string> keys;
    for (const auto& [key, v] : kv) EXPECT_TRUE(keys.insert(key).second) << "duplicate " << key;
    const std::vector<std::string> suffixes = {
        "block_count", "nextn_predict_layers", "context_length", "embedding_length", "feed_forward_length",
        "vocab_size", "attention.head_count", "attention.head_count_kv", "attention.key_length",
        "attention.value_length", "attention.key_length_mla", "attention.value_length_mla",
        "attention.q_lora_rank", "attention.kv_lora_rank", "attention.layer_norm_rms_epsilon",
        "attention.layer_norm_epsilon", "attention.indexer.head_count", "attention.indexer.key_length",
        "attention.indexer.top_k", "attention.indexer.types", "rope.dimension_count", "rope.freq_base",
        "leading_dense_block_count", "expert_count", "expert_used_count", "expert_shared_count",
        "expert_feed_forward_length", "expert_weights_scale", "expert_weights_norm", "expert_gating_func"};
    std::set<std::string> expected = {"general.architecture", "general.name"};
    for (const auto& s : suffixes) expected.insert(k(s));
    EXPECT_EQ(keys, expected);

    auto get = [&](const std::string& key) -> const Value& {
        for (const auto& p : kv)
            if (p.first == key) return p.second;
        throw std::runtime_error("missing " + key);
    };
    // llama.cpp's MLA convention: the absorbed widths, one KV head; 79 blocks with the MTP one.
    EXPECT_EQ(*get(k("block_count")).as_uint(), 79u);
    EXPECT_EQ(*get(k("attention.head_count_kv")).as_uint(), 1u);
    EXPECT_EQ(*get(k("attention.key_length")).as_uint(), 576u);
    EXPECT_EQ(*get(k("attention.value_length")).as_uint(), 512u);
    EXPECT_EQ(*get(k("attention.key_length_mla")).as_uint(), 256u);
    EXPECT_EQ(*get(k("attention.value_length_mla")).as_uint(), 256u);
    EXPECT_EQ(*get(k("expert_gating_func")).as_uint(), 2u);
    EXPECT_EQ(get(k("context_length")).type, ValueType::UINT32);
    EXPECT_EQ(get(k("expert_weights_norm")).type, ValueType::BOOL);
    const Value& types = get(k("attention.indexer.types"));
    ASSERT_TRUE(types.is_array());
    EXPECT_EQ(types.elem_type, ValueType::BOOL);
    EXPECT_EQ(types.elems.size(), 78u);  // trunk layers only, as llama.cpp reads them
    EXPECT_EQ(*get("general.architecture").as_string(), "glm-dsa");
}

TEST(GlmConfig, RoundTripThroughGguf) {
    GlmConfig c;
    c.name = "round trip";
    c.n_layer = 6;
    c.n_nextn = 0;
    c.n_embd = 320;
    c.n_vocab = 1000;
    c.n_head = 6;
    c.q_lora_rank = 48;
    c.kv_lora_rank = 40;
    c.rope_dim = 16;
    c.qk_nope_dim = 24;
    c.v_head_dim = 36;
    c.norm_eps = 3e-6f;
    c.layer_norm_eps = 0.0f;
    c.indexer_heads = 3;
    c.indexer_dim = 64;
    c.indexer_top_k = 7;
    c.indexer_full = {1, 0, 1, 1, 0, 0};
    c.n_dense_lead = 2;
    c.dense_ff = 200;
    c.n_expert = 5;
    c.n_expert_used = 3;
    c.n_expert_shared = 2;
    c.expert_ff = 96;
    c.expert_weights_scale = 1.5f;
    c.expert_weights_norm = false;
    c.rope_base = 5000.0f;
    c.context_length = 5000;

    test::ScratchDir dir;
    const std::string path = dir.file("rt.gguf");
    {
        gguf::Writer w(path);
        c.write_metadata(w);
        w.begin_data();
        w.finish();
    }
    auto f = gguf::File::open(path);
    const GlmConfig r = GlmConfig::from_gguf(*f);
    EXPECT_EQ(r.name, c.name);
    EXPECT_EQ(r.n_layer, c.n_layer);
    EXPECT_EQ(r.n_nextn, c.n_nextn);
    EXPECT_EQ(r.n_embd, c.n_embd);
    EXPECT_EQ(r.n_vocab, c.n_vocab);
    EXPECT_EQ(r.n_head, c.n_head);
    EXPECT_EQ(r.q_lora_rank, c.q_lora_rank);
    EXPECT_EQ(r.kv_lora_rank, c.kv_lora_rank);
    EXPECT_EQ(r.rope_dim, c.rope_dim);
    EXPECT_EQ(r.qk_nope_dim, c.qk_nope_dim);
    EXPECT_EQ(r.v_head_dim, c.v_head_dim);
    EXPECT_EQ(r.norm_eps, c.norm_eps);
    EXPECT_EQ(r.layer_norm_eps, c.layer_norm_eps);
    EXPECT_EQ(r.indexer_heads, c.indexer_heads);
    EXPECT_EQ(r.indexer_dim, c.indexer_dim);
    EXPECT_EQ(r.indexer_top_k, c.indexer_top_k);
    EXPECT_EQ(r.indexer_full, c.indexer_full);
    EXPECT_EQ(r.n_dense_lead, c.n_dense_lead);
    EXPECT_EQ(r.dense_ff, c.dense_ff);
    EXPECT_EQ(r.n_expert, c.n_expert);
    EXPECT_EQ(r.n_expert_used, c.n_expert_used);
    EXPECT_EQ(r.n_expert_shared, c.n_expert_shared);
    EXPECT_EQ(r.expert_ff, c.expert_ff);
    EXPECT_EQ(r.expert_weights_scale, c.expert_weights_scale);
    EXPECT_EQ(r.expert_weights_norm, c.expert_weights_norm);
    EXPECT_EQ(r.rope_base, c.rope_base);
    EXPECT_EQ(r.context_length, c.context_length);

    // The MTP block: block_count counts it, the trunk does not.
    c.n_nextn = 1;
    const GlmConfig m = load(c.metadata());
    EXPECT_EQ(m.n_layer, 6u);
    EXPECT_EQ(m.n_nextn, 1u);
}

TEST(GlmConfig, OptionalKeysTakeLlamaCppDefaults) {
    KV kv = glm52_kv();
    for (const char* s : {"nextn_predict_layers", "attention.indexer.types", "feed_forward_length", "attention.layer_norm_epsilon",
                          "leading_dense_block_count", "expert_weights_scale", "expert_weights_norm",
                          "expert_gating_func", "vocab_size", "attention.head_count_kv", "attention.key_length",
                          "attention.value_length"})
        kv = without(kv, k(s));
    kv = with(kv, "tokenizer.ggml.tokens", Value::array_str(std::vector<std::string>(777, "t")));
    const GlmConfig c = load(kv);
    EXPECT_EQ(c.n_nextn, 0u);
    EXPECT_EQ(c.n_layer, 79u);  // without nextn_predict_layers every block is a trunk layer
    EXPECT_EQ(c.indexer_full, GlmConfig::default_indexer_types(79, 1u << 20));
    EXPECT_EQ(c.n_vocab, 777u);  // the token list's length
    EXPECT_EQ(c.layer_norm_eps, 1e-6f);
    EXPECT_EQ(c.n_dense_lead, 0u);
    EXPECT_EQ(c.expert_weights_scale, 1.0f);
    EXPECT_FALSE(c.expert_weights_norm);
    EXPECT_EQ(c.dense_ff, GlmConfig().dense_ff);
}

TEST(GlmConfig, MissingKeysAreNamed) {
    for (const char* s :
         {"block_count", "context_length", "embedding_length", "attention.head_count", "attention.q_lora_rank",
          "attention.kv_lora_rank", "rope.dimension_count", "attention.key_length_mla",
          "attention.value_length_mla", "attention.layer_norm_rms_epsilon", "attention.indexer.head_count",
          "attention.indexer.key_length", "attention.indexer.top_k", "expert_count", "expert_used_count",
          "expert_shared_count", "expert_feed_forward_length", "rope.freq_base"}) {
        SCOPED_TRACE(s);
        expect_error(without(glm52_kv(), k(s)), {"m.gguf", fmt::format("'{}'", k(s)), "missing"});
    }
    // No vocab_size and no token list to count.
    expect_error(without(glm52_kv(), k("vocab_size")), {"m.gguf", "vocab_size", "tokenizer.ggml.tokens"});
    expect_error(without(glm52_kv(), "general.architecture"), {"m.gguf", "general.architecture", "missing"});
}

TEST(GlmConfig, WrongTypesAreNamed) {
    expect_error(with(glm52_kv(), k("attention.head_count"), Value::str("64")),
                 {"'glm-dsa.attention.head_count'", "string", "unsigned integer"});
    expect_error(with(glm52_kv(), k("embedding_length"), Value::f32(6144.0f)), {"'glm-dsa.embedding_length'", "f32"});
    expect_error(with(glm52_kv(), k("expert_weights_norm"), Value::u32(1)),
                 {"'glm-dsa.expert_weights_norm'", "u32", "bool"});
    expect_error(with(glm52_kv(), k("rope.freq_base"), Value::str("8e6")), {"'glm-dsa.rope.freq_base'", "number"});
    expect_error(with(glm52_kv(), k("attention.indexer.types"), Value::str("full")),
                 {"'glm-dsa.attention.indexer.types'", "bool array"});
    expect_error(with(glm52_kv(), k("attention.indexer.types"), Value::array_str(std::vector<std::string>(78, "1"))),
                 {"'glm-dsa.attention.indexer.types'", "array of string"});
    expect_error(with(glm52_kv(), k("attention.kv_lora_rank"), Value::i32(-512)),
                 {"'glm-dsa.attention.kv_lora_rank'", "negative"});
    expect_error(with(glm52_kv(), k("rope.scaling.type"), Value::u32(1)), {"'glm-dsa.rope.scaling.type'", "string"});
}

TEST(GlmConfig, InconsistentValuesAreNamed) {
    expect_error(with(glm52_kv(), k("attention.head_count_kv"), Value::u32(64)), {"head_count_kv", "must be 1"});
    expect_error(with(glm52_kv(), k("attention.key_length"), Value::u32(512)), {"attention.key_length", "576"});
    expect_error(with(glm52_kv(), k("attention.value_length"), Value::u32(576)), {"attention.value_length", "512"});
    expect_error(with(glm52_kv(), k("attention.key_length_mla"), Value::u32(64)),
                 {"key_length_mla", "must exceed rope.dimension_count 64"});
    expect_error(with(glm52_kv(), k("rope.scaling.type"), Value::str("yarn")), {"rope.scaling.type", "yarn"});
    expect_error(with(glm52_kv(), k("expert_group_count"), Value::u32(8)), {"expert_group_count", "group-limited"});
    expect_error(with(glm52_kv(), k("expert_gating_func"), Value::u32(1)), {"expert_gating_func", "sigmoid"});
    expect_error(with(glm52_kv(), k("nextn_predict_layers"), Value::u32(79)), {"nextn_predict_layers", "below"});
    expect_error(with(glm52_kv(), k("nextn_predict_layers"), Value::u32(2)), {"nextn_predict_layers", "is 2"});
    expect_error(with(glm52_kv(), k("expert_used_count"), Value::u32(257)), {"expert_used_count", "expert_count 256"});
    expect_error(with(glm52_kv(), k("leading_dense_block_count"), Value::u32(79)),
                 {"leading_dense_block_count", "is 79, expected 0 to 78"});
    // (key_length = kv_lora + rope is checked before the ranges: left out here.)
    expect_error(with(without(glm52_kv(), k("attention.key_length")), k("rope.dimension_count"), Value::u32(63)),
                 {"rope.dimension_count", "even"});
    expect_error(with(glm52_kv(), k("attention.indexer.key_length"), Value::u32(32)),
                 {"attention.indexer.key_length", ">= rope dims 64"});
    expect_error(with(glm52_kv(), k("attention.layer_norm_rms_epsilon"), Value::f32(0.0f)),
                 {"layer_norm_rms_epsilon", "> 0"});
    expect_error(with(glm52_kv(), k("attention.layer_norm_epsilon"), Value::f32(-1.0f)),
                 {"attention.layer_norm_epsilon", ">= 0"});
    expect_error(with(glm52_kv(), k("rope.freq_base"), Value::f32(0.0f)), {"rope.freq_base", "> 0"});
    expect_error(with(glm52_kv(), "general.architecture", Value::str("deepseek4")),
                 {"general.architecture", "deepseek4", "glm-dsa"});
    // Indexer types: one entry per trunk layer, the first full.
    expect_error(with(glm52_kv(), k("attention.indexer.types"), bools(std::vector<uint8_t>(77, 1))),
                 {"'glm-dsa.attention.indexer.types'", "77 entries"});
    std::vector<uint8_t> shared_first(78, 1);
    shared_first[0] = 0;
    expect_error(with(glm52_kv(), k("attention.indexer.types"), bools(shared_first)),
                 {"m.gguf", "glm-dsa.attention.indexer.types", "entry 0 is shared"});
    expect_error(with(glm52_kv(), k("attention.indexer.types"), Value::boolean(false)),
                 {"glm-dsa.attention.indexer.types", "entry 0"});
}

// Every count has the range config.h gives it; the error names the key and the range.
TEST(GlmConfig, CountsOutsideTheirRangeAreNamed) {
    const std::vector<std::tuple<std::string, uint64_t, std::string>> cases = {
        {"embedding_length", 0, "is 0, expected 1 to 65536"},
        {"embedding_length", 65537, "expected 1 to 65536"},
        {"vocab_size", (1ull << 24) + 1, "expected 1 to 16777216"},
        {"attention.head_count", 0, "is 0, expected 1 to 4096"},
        {"attention.head_count", 4097, "expected 1 to 4096"},
        {"attention.q_lora_rank", 65537, "expected 1 to 65536"},
        {"attention.kv_lora_rank", 0, "expected 1 to 65536"},
        {"attention.value_length_mla", 16385, "expected 1 to 16384"},
        {"attention.indexer.head_count", 4097, "expected 1 to 4096"},
        {"attention.indexer.key_length", 16385, "<= 16384"},
        {"attention.indexer.top_k", 0, "expected 1 to 1048576"},
        {"attention.indexer.top_k", (1ull << 20) + 1, "expected 1 to 1048576"},
        {"feed_forward_length", (1ull << 18) + 1, "expected 1 to 262144"},
        {"expert_count", 65537, "expected 1 to 65536"},
        {"expert_shared_count", 0, "expected 1 to 64"},
        {"expert_shared_count", 65, "expected 1 to 64"},
        {"expert_feed_forward_length", (1ull << 18) + 1, "expected 1 to 262144"},
        {"context_length", 0, "expected 1 to 1099511627776"},
        {"context_length", (1ull << 40) + 1, "expected 1 to 1099511627776"},
        {"block_count", 4098, "expected 1 to 4096"},
    };
    for (const auto& [suffix, value, why] : cases) {
        const std::string key = k(suffix);
        SCOPED_TRACE(key);
        const Value v = value > UINT32_MAX ? Value::u64(value) : Value::u32(uint32_t(value));
        KV kv = with(glm52_kv(), key, v);
        if (suffix == "block_count") kv = without(kv, k("attention.indexer.types"));
        // key_length (kv_lora + rope) is checked against kv_lora before the ranges.
        if (suffix == "attention.kv_lora_rank") kv = without(without(kv, k("attention.key_length")), k("attention.value_length"));
        expect_error(kv, {"m.gguf", key, why});
    }
}

}  // namespace
}  // namespace ds4::glm
