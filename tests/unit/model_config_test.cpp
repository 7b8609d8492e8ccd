// ModelConfig: the published key set, metadata round trip through a real GGUF file, and the
// validation errors of from_gguf() (each names the offending key).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/deepseek4/config.h"
#include "support/gguf_test_util.h"

namespace ds4::deepseek4 {
namespace {

using gguf::Value;
using gguf::ValueType;
using KV = std::vector<std::pair<std::string, Value>>;

// Writes a tensor-less GGUF with exactly these keys and opens it.
std::unique_ptr<gguf::File> write_open(const test::ScratchDir& dir, const KV& kv,
                                       const std::string& name = "m.gguf") {
    const std::string path = dir.file(name);
    {
        gguf::Writer w(path);
        for (const auto& [k, v] : kv) w.set(k, v);
        w.begin_data();
        w.finish();
    }
    return gguf::File::open(path);
}

KV without(KV kv, const std::string& key) {
    kv.erase(std::remove_if(kv.begin(), kv.end(), [&](const auto& p) { return p.first == key; }),
             kv.end());
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

// Expects from_gguf to throw, with every fragment in the message.
void expect_error(const KV& kv, std::vector<std::string> fragments) {
    test::ScratchDir dir;
    auto f = write_open(dir, kv);
    try {
        (void)ModelConfig::from_gguf(*f);
        ADD_FAILURE() << "no error; expected one mentioning " << fragments[0];
    } catch (const Error& e) {
        const std::string msg = e.what();
        for (const auto& frag : fragments)
            EXPECT_NE(msg.find(frag), std::string::npos) << "message: " << msg << "\nmissing: " << frag;
    }
}

TEST(ModelConfig, FlashRatioScheduleMatchesSpec) {
    const ModelConfig c = ModelConfig::flash();
    ASSERT_EQ(c.compress_ratios.size(), 43u);
    // §1.1: layers 0,1 ratio 0; 2,4,…,42 ratio 4 (21 layers); 3,5,…,41 ratio 128 (20 layers).
    EXPECT_EQ(c.compress_ratios[0], 0u);
    EXPECT_EQ(c.compress_ratios[1], 0u);
    EXPECT_EQ(c.compress_ratios[2], 4u);
    EXPECT_EQ(c.compress_ratios[3], 128u);
    EXPECT_EQ(c.compress_ratios[42], 4u);
    EXPECT_EQ(std::count(c.compress_ratios.begin(), c.compress_ratios.end(), 4u), 21);
    EXPECT_EQ(std::count(c.compress_ratios.begin(), c.compress_ratios.end(), 128u), 20);
    EXPECT_EQ(c.hc_dim(), 16384u);
    EXPECT_EQ(c.hc_mix(), 24u);
    EXPECT_EQ(c.nope_dim(), 448u);
    EXPECT_NO_THROW(c.validate());
}

// spec/ARCHITECTURE.md §1.3: the PRO values, none of which the loader may reject.
TEST(ModelConfig, ProShapeMatchesSpecAndRoundTrips) {
    const ModelConfig c = ModelConfig::pro();
    EXPECT_NO_THROW(c.validate());
    EXPECT_EQ(c.n_layer, 61u);
    EXPECT_EQ(c.n_embd, 7168u);
    EXPECT_EQ(c.n_head, 128u);
    EXPECT_EQ(c.o_groups, 16u);
    EXPECT_EQ(c.q_lora_rank, 1536u);
    EXPECT_EQ(c.n_expert, 384u);
    EXPECT_EQ(c.expert_ff, 3072u);
    EXPECT_EQ(c.indexer_top_k, 1024u);
    EXPECT_EQ(c.n_hash_layers, 3u);
    EXPECT_FLOAT_EQ(c.expert_weights_scale, 2.5f);
    EXPECT_EQ(c.hc_dim(), 28672u);
    // 128,128 then 4 on even and 128 on odd layers: 30 ratio-4, 31 ratio-128, no ratio 0.
    ASSERT_EQ(c.compress_ratios.size(), 61u);
    EXPECT_EQ(c.compress_ratios[0], 128u);
    EXPECT_EQ(c.compress_ratios[1], 128u);
    EXPECT_EQ(c.compress_ratios[2], 4u);
    EXPECT_EQ(c.compress_ratios[59], 128u);
    EXPECT_EQ(c.compress_ratios[60], 4u);
    EXPECT_EQ(std::count(c.compress_ratios.begin(), c.compress_ratios.end(), 4u), 30);
    EXPECT_EQ(std::count(c.compress_ratios.begin(), c.compress_ratios.end(), 128u), 31);
    EXPECT_EQ(std::count(c.compress_ratios.begin(), c.compress_ratios.end(), 0u), 0);

    // Every PRO value survives the metadata: nothing in from_gguf() is pinned to Flash.
    test::ScratchDir dir;
    auto f = write_open(dir, c.metadata());
    const ModelConfig r = ModelConfig::from_gguf(*f);
    EXPECT_EQ(r.compress_ratios, c.compress_ratios);
    EXPECT_EQ(r.n_layer, 61u);
    EXPECT_EQ(r.n_embd, 7168u);
    EXPECT_EQ(r.n_head, 128u);
    EXPECT_EQ(r.o_groups, 16u);
    EXPECT_EQ(r.q_lora_rank, 1536u);
    EXPECT_EQ(r.expert_ff, 3072u);
    EXPECT_EQ(r.indexer_top_k, 1024u);
    EXPECT_EQ(r.n_expert, 384u);
    EXPECT_FLOAT_EQ(r.expert_weights_scale, 2.5f);

    // Truncating keeps the PRO pattern (what `ds4-gguf-gen --preset pro --layers N` writes).
    ModelConfig t = c;
    t.set_layer_count(5, ModelConfig::pro_ratio);
    EXPECT_EQ(t.compress_ratios, (std::vector<uint32_t>{128, 128, 4, 128, 4}));
}

TEST(ModelConfig, MetadataIsThePublishedKeySet) {
    const KV kv = ModelConfig::flash().metadata();
    std::set<std::string> keys;
    for (const auto& [k, v] : kv) EXPECT_TRUE(keys.insert(k).second) << "duplicate " << k;
    // spec/ARCHITECTURE.md §1.2 (DS4-checked keys, context_length, expert_gating_func, the yarn
    // type) plus general.architecture / general.name.
    const std::vector<std::string> suffixes = {
        "block_count", "context_length", "embedding_length", "vocab_size",
        "attention.head_count", "attention.head_count_kv", "attention.key_length",
        "attention.value_length", "rope.dimension_count", "attention.q_lora_rank",
        "attention.output_lora_rank", "attention.output_group_count", "attention.sliding_window",
        "attention.indexer.head_count", "attention.indexer.key_length", "attention.indexer.top_k",
        "attention.compress_ratios", "attention.compress_rope_freq_base",
        "attention.layer_norm_rms_epsilon", "expert_count", "expert_used_count",
        "expert_shared_count", "expert_feed_forward_length", "expert_weights_scale",
        "expert_weights_norm", "expert_gating_func", "hash_layer_count", "swiglu_clamp_exp",
        "hyper_connection.count", "hyper_connection.sinkhorn_iterations",
        "hyper_connection.epsilon", "rope.freq_base", "rope.scaling.type", "rope.scaling.factor",
        "rope.scaling.original_context_length", "rope.scaling.yarn_beta_fast",
        "rope.scaling.yarn_beta_slow"};
    std::set<std::string> expected = {"general.architecture", "general.name"};
    for (const auto& s : suffixes) expected.insert("deepseek4." + s);
    EXPECT_EQ(keys, expected);

    auto get = [&](const std::string& k) -> const Value& {
        for (const auto& p : kv)
            if (p.first == k) return p.second;
        throw std::runtime_error("missing " + k);
    };
    // Types llama.cpp insists on (spec/ORACLE.md): context_length u32, gating func 4.
    EXPECT_EQ(get("deepseek4.context_length").type, ValueType::UINT32);
    EXPECT_EQ(*get("deepseek4.context_length").as_uint(), 1048576u);
    EXPECT_EQ(*get("deepseek4.expert_gating_func").as_uint(), 4u);
    EXPECT_EQ(get("deepseek4.expert_weights_norm").type, ValueType::BOOL);
    EXPECT_EQ(get("deepseek4.block_count").type, ValueType::UINT32);
    EXPECT_EQ(get("deepseek4.expert_weights_scale").type, ValueType::FLOAT32);
    EXPECT_EQ(*get("deepseek4.rope.scaling.type").as_string(), "yarn");
    EXPECT_EQ(*get("general.architecture").as_string(), "deepseek4");
    const Value& ratios = get("deepseek4.attention.compress_ratios");
    ASSERT_TRUE(ratios.is_array());
    EXPECT_EQ(ratios.elem_type, ValueType::INT32);
    ASSERT_EQ(ratios.elems.size(), 44u);  // 43 trunk layers + the MTP block's 0, as HF has it
    EXPECT_EQ(*ratios.elem_int(43), 0);
    EXPECT_EQ(*ratios.elem_int(42), 4);
    EXPECT_EQ(get("deepseek4.swiglu_clamp_exp").elems.size(), 43u);
    EXPECT_EQ(*get("deepseek4.swiglu_clamp_exp").elem_double(0), 10.0);
}

TEST(ModelConfig, RoundTripThroughGguf) {
    ModelConfig c = ModelConfig::flash();
    c.set_layer_count(5);
    c.compress_ratios = {0, 128, 4, 0, 4};
    c.n_embd = 320;
    c.n_vocab = 1000;
    c.n_head = 6;
    c.head_dim = 80;
    c.rope_dim = 16;
    c.q_lora_rank = 48;
    c.o_lora_rank = 40;
    c.o_groups = 3;
    c.window = 9;
    c.indexer_heads = 3;
    c.indexer_dim = 32;
    c.indexer_top_k = 7;
    c.n_expert = 5;
    c.n_expert_used = 3;
    c.n_expert_shared = 2;
    c.expert_ff = 96;
    c.n_hash_layers = 2;
    c.hc = 3;
    c.sinkhorn_iters = 7;
    c.hc_eps = 2e-6f;
    c.norm_eps = 3e-6f;
    c.rope_base = 5000.0f;
    c.compress_rope_base = 20000.0f;
    c.yarn_factor = 4.0f;
    c.yarn_orig_ctx = 1024;
    c.yarn_beta_fast = 16.0f;
    c.yarn_beta_slow = 2.0f;
    c.context_length = 5000;
    c.expert_weights_scale = 2.5f;
    c.expert_weights_norm = false;
    c.swiglu_clamp_exp = {1, 2, 3, 4, 5};
    c.swiglu_clamp_shexp = {6, 7, 8, 9, 10};
    c.name = "round trip";

    test::ScratchDir dir;
    const std::string path = dir.file("rt.gguf");
    {
        gguf::Writer w(path);
        c.write_metadata(w);
        w.begin_data();
        w.finish();
    }
    auto f = gguf::File::open(path);
    const ModelConfig r = ModelConfig::from_gguf(*f);
    EXPECT_EQ(r.name, c.name);
    EXPECT_EQ(r.n_layer, c.n_layer);
    EXPECT_EQ(r.n_embd, c.n_embd);
    EXPECT_EQ(r.n_vocab, c.n_vocab);
    EXPECT_EQ(r.n_head, c.n_head);
    EXPECT_EQ(r.n_head_kv, 1u);
    EXPECT_EQ(r.head_dim, c.head_dim);
    EXPECT_EQ(r.rope_dim, c.rope_dim);
    EXPECT_EQ(r.q_lora_rank, c.q_lora_rank);
    EXPECT_EQ(r.o_lora_rank, c.o_lora_rank);
    EXPECT_EQ(r.o_groups, c.o_groups);
    EXPECT_EQ(r.window, c.window);
    EXPECT_EQ(r.indexer_heads, c.indexer_heads);
    EXPECT_EQ(r.indexer_dim, c.indexer_dim);
    EXPECT_EQ(r.indexer_top_k, c.indexer_top_k);
    EXPECT_EQ(r.n_expert, c.n_expert);
    EXPECT_EQ(r.n_expert_used, c.n_expert_used);
    EXPECT_EQ(r.n_expert_shared, c.n_expert_shared);
    EXPECT_EQ(r.expert_ff, c.expert_ff);
    EXPECT_EQ(r.n_hash_layers, c.n_hash_layers);
    EXPECT_EQ(r.hc, c.hc);
    EXPECT_EQ(r.sinkhorn_iters, c.sinkhorn_iters);
    EXPECT_EQ(r.hc_eps, c.hc_eps);
    EXPECT_EQ(r.norm_eps, c.norm_eps);
    EXPECT_EQ(r.rope_base, c.rope_base);
    EXPECT_EQ(r.compress_rope_base, c.compress_rope_base);
    EXPECT_EQ(r.yarn_factor, c.yarn_factor);
    EXPECT_EQ(r.yarn_orig_ctx, c.yarn_orig_ctx);
    EXPECT_EQ(r.yarn_beta_fast, c.yarn_beta_fast);
    EXPECT_EQ(r.yarn_beta_slow, c.yarn_beta_slow);
    EXPECT_EQ(r.context_length, c.context_length);
    EXPECT_EQ(r.expert_weights_scale, c.expert_weights_scale);
    EXPECT_EQ(r.expert_weights_norm, c.expert_weights_norm);
    EXPECT_EQ(r.compress_ratios, c.compress_ratios);
    EXPECT_EQ(r.swiglu_clamp_exp, c.swiglu_clamp_exp);
    EXPECT_EQ(r.swiglu_clamp_shexp, c.swiglu_clamp_shexp);
}

const KV& flash_kv() {
    static const KV kv = ModelConfig::flash().metadata();
    return kv;
}

TEST(ModelConfig, AcceptsAlternativeEncodings) {
    test::ScratchDir dir;
    KV kv = flash_kv();
    kv = with(kv, "deepseek4.context_length", Value::u64(1ull << 33));
    kv = with(kv, "deepseek4.rope.scaling.original_context_length", Value::u64(65536));
    kv = with(kv, "deepseek4.expert_weights_scale", Value::f64(1.5));
    kv = with(kv, "deepseek4.rope.freq_base", Value::u32(10000));
    kv = with(kv, "deepseek4.hyper_connection.epsilon", Value::f64(1e-6));
    std::vector<uint32_t> ratios(43);
    for (uint32_t i = 0; i < 43; ++i) ratios[i] = ModelConfig::flash_ratio(i);
    kv = with(kv, "deepseek4.attention.compress_ratios", Value::array_u32(ratios));  // exactly 43
    kv = without(kv, "deepseek4.expert_gating_func");  // DS4 files may lack it
    kv = without(kv, "deepseek4.rope.scaling.type");
    std::vector<Value::Scalar> clamps(43, Value::Scalar(double(10.0)));
    kv = with(kv, "deepseek4.swiglu_clamp_exp", Value::array(ValueType::FLOAT64, clamps));
    auto f = write_open(dir, kv);
    const ModelConfig c = ModelConfig::from_gguf(*f);
    EXPECT_EQ(c.context_length, 1ull << 33);
    EXPECT_EQ(c.yarn_orig_ctx, 65536u);
    EXPECT_EQ(c.expert_weights_scale, 1.5f);
    EXPECT_EQ(c.rope_base, 10000.0f);
    EXPECT_EQ(c.compress_ratios, ModelConfig::flash().compress_ratios);
    EXPECT_EQ(c.swiglu_clamp_exp, std::vector<float>(43, 10.0f));
    // swiglu_clamp_shexp absent: the shared expert uses the routed clamp (LCP's fallback).
    EXPECT_EQ(c.swiglu_clamp_shexp, c.swiglu_clamp_exp);
}

TEST(ModelConfig, MissingKeysAreNamed) {
    for (const char* key :
         {"deepseek4.block_count", "deepseek4.attention.head_count", "deepseek4.vocab_size",
          "deepseek4.attention.indexer.top_k", "deepseek4.attention.compress_ratios",
          "deepseek4.swiglu_clamp_exp", "deepseek4.rope.scaling.yarn_beta_slow",
          "deepseek4.expert_weights_norm", "deepseek4.context_length", "general.architecture"}) {
        SCOPED_TRACE(key);
        expect_error(without(flash_kv(), key), {"m.gguf", key, "missing"});
    }
}

TEST(ModelConfig, WrongTypesAreNamed) {
    expect_error(with(flash_kv(), "deepseek4.attention.head_count", Value::str("64")),
                 {"'deepseek4.attention.head_count'", "string", "unsigned integer"});
    expect_error(with(flash_kv(), "deepseek4.embedding_length", Value::f32(4096.0f)),
                 {"'deepseek4.embedding_length'", "f32"});
    expect_error(with(flash_kv(), "deepseek4.expert_weights_norm", Value::u32(1)),
                 {"'deepseek4.expert_weights_norm'", "u32", "bool"});
    expect_error(with(flash_kv(), "deepseek4.rope.freq_base", Value::str("1e4")),
                 {"'deepseek4.rope.freq_base'", "number"});
    expect_error(with(flash_kv(), "deepseek4.attention.compress_ratios", Value::u32(4)),
                 {"'deepseek4.attention.compress_ratios'", "array"});
    expect_error(with(flash_kv(), "deepseek4.attention.compress_ratios",
                      Value::array_str(std::vector<std::string>(44, "4"))),
                 {"'deepseek4.attention.compress_ratios'", "array of string"});
    expect_error(with(flash_kv(), "deepseek4.attention.head_count", Value::i32(-64)),
                 {"'deepseek4.attention.head_count'", "negative"});
    expect_error(with(flash_kv(), "deepseek4.block_count", Value::u64(1ull << 40)),
                 {"'deepseek4.block_count'", "out of range"});
}

TEST(ModelConfig, InvalidValuesAreNamed) {
    std::vector<int32_t> ratios(44, 0);
    ratios[5] = 3;
    expect_error(with(flash_kv(), "deepseek4.attention.compress_ratios", Value::array_i32(ratios)),
                 {"compress_ratios", "entry 5 is 3"});
    expect_error(with(flash_kv(), "deepseek4.attention.compress_ratios",
                      Value::array_i32(std::vector<int32_t>(42, 0))),
                 {"compress_ratios", "42 entries", "at least 43"});
    expect_error(with(flash_kv(), "deepseek4.swiglu_clamp_exp",
                      Value::array_f32(std::vector<float>(10, 10.0f))),
                 {"swiglu_clamp_exp", "10 entries"});
    expect_error(with(flash_kv(), "deepseek4.attention.value_length", Value::u32(256)),
                 {"value_length", "key_length"});
    expect_error(with(flash_kv(), "deepseek4.attention.head_count_kv", Value::u32(8)),
                 {"head_count_kv", "must be 1"});
    expect_error(with(flash_kv(), "deepseek4.attention.output_group_count", Value::u32(7)),
                 {"output_group_count", "does not divide"});
    expect_error(with(flash_kv(), "deepseek4.rope.dimension_count", Value::u32(63)),
                 {"rope.dimension_count", "even"});
    expect_error(with(flash_kv(), "deepseek4.rope.dimension_count", Value::u32(1024)),
                 {"rope.dimension_count", "key_length"});
    expect_error(with(flash_kv(), "deepseek4.expert_used_count", Value::u32(300)),
                 {"expert_used_count", "expert_count"});
    expect_error(with(flash_kv(), "deepseek4.hash_layer_count", Value::u32(44)),
                 {"hash_layer_count", "block_count"});
    expect_error(with(flash_kv(), "deepseek4.attention.indexer.key_length", Value::u32(96)),
                 {"indexer.key_length", "power of two"});
    expect_error(with(flash_kv(), "deepseek4.expert_gating_func", Value::u32(1)),
                 {"expert_gating_func", "sqrt-softplus"});
    expect_error(with(flash_kv(), "deepseek4.expert_group_count", Value::u32(8)),
                 {"expert_group_count", "group-limited"});
    expect_error(with(flash_kv(), "deepseek4.rope.scaling.type", Value::str("linear")),
                 {"rope.scaling.type", "linear"});
    expect_error(with(flash_kv(), "general.architecture", Value::str("deepseek2")),
                 {"general.architecture", "deepseek2"});
    expect_error(with(flash_kv(), "deepseek4.attention.layer_norm_rms_epsilon", Value::f32(0.0f)),
                 {"layer_norm_rms_epsilon", "> 0"});
    expect_error(with(flash_kv(), "deepseek4.attention.head_count", Value::u32(0)),
                 {"attention.head_count", "is 0, expected 1 to 4096"});
}

// Issue 22 item 5: every count has a documented range (config.h), checked at load, and the
// error names the key and the range. The values here are just past each bound; the first
// cases are the reported ones (a hang, a negative int, a bad_alloc).
TEST(ModelConfig, CountsOutsideTheirRangeAreNamed) {
    const std::vector<std::tuple<std::string, uint64_t, std::string>> cases = {
        {"hyper_connection.sinkhorn_iterations", 100000000, "is 100000000, expected 1 to 1000"},
        {"hyper_connection.sinkhorn_iterations", 1ull << 31, "is 2147483648, expected 1 to 1000"},
        {"hyper_connection.sinkhorn_iterations", 0, "is 0, expected 1 to 1000"},
        {"attention.sliding_window", 1ull << 31, "is 2147483648, expected 1 to 8192"},
        {"attention.sliding_window", 8193, "expected 1 to 8192"},
        {"hyper_connection.count", 65, "is 65, expected 1 to 64"},
        {"embedding_length", 65537, "expected 1 to 65536"},
        {"vocab_size", (1ull << 24) + 1, "expected 1 to 16777216"},
        {"attention.head_count", 4097, "expected 1 to 4096"},
        {"attention.key_length", 16385, "expected 1 to 16384"},
        {"attention.q_lora_rank", 65537, "expected 1 to 65536"},
        {"attention.output_lora_rank", 65537, "expected 1 to 65536"},
        {"attention.output_group_count", 128, "is 128, expected 1 to 64"},
        {"attention.indexer.head_count", 4097, "expected 1 to 4096"},
        {"attention.indexer.key_length", 32768, "<= 16384"},
        {"attention.indexer.top_k", (1ull << 20) + 1, "expected 1 to 1048576"},
        {"expert_count", 65537, "expected 1 to 65536"},
        {"expert_shared_count", 65, "expected 1 to 64"},
        {"expert_feed_forward_length", (1ull << 18) + 1, "expected 1 to 262144"},
        {"context_length", (1ull << 40) + 1, "expected 1 to 1099511627776"},
        {"rope.scaling.original_context_length", (1ull << 40) + 1, "expected 1 to 1099511627776"},
        {"block_count", 4097, "is 4097, expected 1 to 4096"},
    };
    for (const auto& [suffix, value, why] : cases) {
        const std::string key = "deepseek4." + suffix;
        SCOPED_TRACE(key);
        const Value v = value > UINT32_MAX ? Value::u64(value) : Value::u32(uint32_t(value));
        KV kv = with(flash_kv(), key, v);
        if (suffix == "attention.key_length") kv = with(kv, "deepseek4.attention.value_length", v);
        expect_error(kv, {"m.gguf", key, why});
    }
    // The upper bounds themselves load.
    for (const auto& [suffix, value] : std::vector<std::pair<std::string, uint32_t>>{
             {"hyper_connection.sinkhorn_iterations", 1000}, {"attention.sliding_window", 8192},
             {"attention.indexer.top_k", 1u << 20}}) {
        test::ScratchDir dir;
        auto f = write_open(dir, with(flash_kv(), "deepseek4." + suffix, Value::u32(value)));
        EXPECT_NO_THROW((void)ModelConfig::from_gguf(*f)) << suffix;
    }
}

TEST(ModelConfig, ValidateRejectsInconsistentShapes) {
    ModelConfig c = ModelConfig::flash();
    c.compress_ratios.pop_back();
    EXPECT_THROW(c.validate(), Error);
    c = ModelConfig::flash();
    c.compress_ratios[7] = 64;
    EXPECT_THROW(c.validate(), Error);
    c = ModelConfig::flash();
    c.n_expert_shared = 0;
    EXPECT_THROW(c.validate(), Error);
    c = ModelConfig::flash();
    c.set_layer_count(2);
    EXPECT_EQ(c.compress_ratios, (std::vector<uint32_t>{0, 0}));
    EXPECT_EQ(c.swiglu_clamp_exp.size(), 2u);
    c.n_hash_layers = 2;
    EXPECT_NO_THROW(c.validate());
}

}  // namespace
}  // namespace ds4::deepseek4
