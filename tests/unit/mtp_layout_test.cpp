// MTP heads in the deepseek4 layout (layout.h, config.h): the metadata of a main GGUF with an
// embedded MTP block (block_count = trunk + nextn_predict_layers, per-layer arrays of
// block_count entries) round-trips to the trunk's configuration, bad nextn metadata fails
// naming the key, and the two MTP layouts (upstream's mtp.0.*, llama.cpp's blk.<L>.nextn.*)
// list the names and shapes their loaders bind.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/deepseek4/config.h"
#include "model/deepseek4/layout.h"
#include "support/gguf_test_util.h"

namespace ds4::deepseek4 {
namespace {

using gguf::Value;

ModelConfig five_layers() {
    ModelConfig c = ModelConfig::flash();
    c.set_layer_count(5);
    c.compress_ratios = {0, 128, 4, 0, 4};
    c.swiglu_clamp_exp = {1, 2, 3, 4, 5};
    c.swiglu_clamp_shexp = {6, 7, 8, 9, 10};
    return c;
}

const Value& get(const std::vector<std::pair<std::string, Value>>& kv, const std::string& k) {
    for (const auto& p : kv)
        if (p.first == k) return p.second;
    throw std::runtime_error("missing " + k);
}

// Writes `c`'s metadata with one key replaced (or added) and reads it back.
ModelConfig read_back(const test::ScratchDir& dir, const ModelConfig& c, const std::string& key = {},
                      const Value* v = nullptr) {
    const std::string path = dir.file("m.gguf");
    {
        gguf::Writer w(path);
        c.write_metadata(w);
        if (v) w.set(key, *v);
        w.begin_data();
        w.finish();
    }
    return ModelConfig::from_gguf(*gguf::File::open(path));
}

TEST(MtpMetadata, EmbeddedBlockCountsInBlockCountAndArrays) {
    ModelConfig c = five_layers();
    c.n_nextn = 1;
    const auto kv = c.metadata();
    EXPECT_EQ(*get(kv, "deepseek4.block_count").as_uint(), 6u);
    EXPECT_EQ(*get(kv, "deepseek4.nextn_predict_layers").as_uint(), 1u);
    const Value& ratios = get(kv, "deepseek4.attention.compress_ratios");
    ASSERT_EQ(ratios.elems.size(), 6u);  // llama.cpp reads block_count entries
    EXPECT_EQ(*ratios.elem_int(4), 4);
    EXPECT_EQ(*ratios.elem_int(5), 0);  // the MTP block: raw window only
    const Value& clamps = get(kv, "deepseek4.swiglu_clamp_exp");
    ASSERT_EQ(clamps.elems.size(), 6u);  // llama.cpp wants exactly block_count
    EXPECT_EQ(*clamps.elem_double(5), 5.0);
    EXPECT_EQ(get(kv, "deepseek4.swiglu_clamp_shexp").elems.size(), 6u);

    test::ScratchDir dir;
    const ModelConfig r = read_back(dir, c);
    EXPECT_EQ(r.n_layer, 5u);  // the trunk
    EXPECT_EQ(r.n_nextn, 1u);
    EXPECT_EQ(r.compress_ratios, c.compress_ratios);
    EXPECT_EQ(r.swiglu_clamp_exp, c.swiglu_clamp_exp);
    EXPECT_EQ(r.swiglu_clamp_shexp, c.swiglu_clamp_shexp);

    // Without MTP blocks nothing changes: no key, block_count = trunk.
    const auto plain = five_layers().metadata();
    EXPECT_EQ(*get(plain, "deepseek4.block_count").as_uint(), 5u);
    EXPECT_THROW(get(plain, "deepseek4.nextn_predict_layers"), std::runtime_error);
    EXPECT_EQ(read_back(dir, five_layers()).n_nextn, 0u);
}

void expect_key_error(const ModelConfig& c, const Value& v, const std::string& want) {
    test::ScratchDir dir;
    try {
        read_back(dir, c, "deepseek4.nextn_predict_layers", &v);
        FAIL() << "nextn_predict_layers = " << v.to_string() << " loaded";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("m.gguf"), std::string::npos) << msg;
        EXPECT_NE(msg.find("'deepseek4.nextn_predict_layers'"), std::string::npos) << msg;
        EXPECT_NE(msg.find(want), std::string::npos) << msg;
    }
}

TEST(MtpMetadata, BadNextnCountNamesTheKey) {
    const ModelConfig c = five_layers();  // block_count 5
    expect_key_error(c, Value::u32(5), "must be below block_count 5");
    expect_key_error(c, Value::u32(9), "must be below block_count 5");
    expect_key_error(c, Value::i32(-1), "negative");
    expect_key_error(c, Value::str("1"), "expected an unsigned integer");
    // nextn 2 of 5 leaves three trunk layers (the three hash layers): fine as metadata.
    test::ScratchDir dir;
    const Value two = Value::u32(2);
    const ModelConfig r = read_back(dir, c, "deepseek4.nextn_predict_layers", &two);
    EXPECT_EQ(r.n_layer, 3u);
    EXPECT_EQ(r.n_nextn, 2u);
    EXPECT_EQ(r.compress_ratios, (std::vector<uint32_t>{0, 128, 4}));
}

std::map<std::string, TensorSpec> by_name(const std::vector<TensorSpec>& v) {
    std::map<std::string, TensorSpec> m;
    for (const auto& s : v) EXPECT_TRUE(m.emplace(s.name, s).second) << "duplicate " << s.name;
    return m;
}

TEST(MtpLayout, SupportFileIsUpstreamsThirtyTwoTensors) {
    const ModelConfig c = ModelConfig::flash();
    const auto layout = mtp_support_layout(c);
    ASSERT_EQ(layout.size(), 32u);  // as upstream's DeepSeek-V4-Flash-MTP GGUF
    const auto m = by_name(layout);
    using V = std::vector<int64_t>;
    EXPECT_EQ(m.at("mtp.0.e_proj.weight").ne, (V{4096, 4096}));
    EXPECT_EQ(m.at("mtp.0.e_proj.weight").cls, TensorClass::MtpProj);
    EXPECT_EQ(m.at("mtp.0.h_proj.weight").ne, (V{4096, 4096}));
    EXPECT_EQ(m.at("mtp.0.hc_head_fn.weight").ne, (V{16384, 4}));
    EXPECT_EQ(m.at("mtp.0.hc_head_fn.weight").cls, TensorClass::Hc);
    EXPECT_EQ(m.at("mtp.0.hc_head_base.weight").ne, (V{4}));
    EXPECT_EQ(m.at("mtp.0.hc_head_scale.weight").ne, (V{1}));
    for (const char* n : {"mtp.0.enorm.weight", "mtp.0.hnorm.weight", "mtp.0.norm.weight"}) {
        EXPECT_EQ(m.at(n).ne, (V{4096})) << n;
        EXPECT_EQ(m.at(n).cls, TensorClass::Norm) << n;
    }
    // The block: ratio 0 (no compressor, no indexer), biased routing (exp_probs_b, no tid2eid).
    for (const TensorSpec& s : layer_tensor_layout(c, "mtp.0.", 43, {0, false})) {
        ASSERT_TRUE(m.count(s.name)) << s.name;
        EXPECT_EQ(m.at(s.name).ne, s.ne) << s.name;
    }
    EXPECT_TRUE(m.count("mtp.0.exp_probs_b.bias"));
    for (const auto& [name, s] : m) {
        EXPECT_EQ(name.find("compressor"), std::string::npos) << name;
        EXPECT_EQ(name.find("indexer"), std::string::npos) << name;
        EXPECT_EQ(name.find("tid2eid"), std::string::npos) << name;
        EXPECT_EQ(s.layer, 43) << name;
    }
    EXPECT_EQ(TypeRecipe::flash_q2().of(TensorClass::MtpProj), TensorType::Q8_0);  // upstream's
}

TEST(MtpLayout, EmbeddedBlockIsLlamaCppsNextnLayout) {
    const ModelConfig c = ModelConfig::flash();
    const NextnLayout l = mtp_embedded_layout(c, 43);
    const auto req = by_name(l.required), opt = by_name(l.optional);
    using V = std::vector<int64_t>;
    EXPECT_EQ(req.at("blk.43.nextn.eh_proj.weight").ne, (V{8192, 4096}));  // [e_proj | h_proj]
    EXPECT_EQ(req.at("blk.43.nextn.eh_proj.weight").cls, TensorClass::MtpProj);
    EXPECT_EQ(req.at("blk.43.nextn.enorm.weight").ne, (V{4096}));
    EXPECT_EQ(req.at("blk.43.nextn.hnorm.weight").ne, (V{4096}));
    EXPECT_EQ(req.size(), 24u + 3u);  // the block and the three nextn tensors llama.cpp requires
    EXPECT_EQ(req.at("blk.43.ffn_gate_exps.weight").ne, (V{4096, 2048, 256}));
    EXPECT_TRUE(req.count("blk.43.exp_probs_b.bias"));
    EXPECT_EQ(opt.size(), 3u);
    EXPECT_EQ(opt.at("blk.43.nextn.shared_head_norm.weight").ne, (V{4096}));
    EXPECT_EQ(opt.at("blk.43.nextn.embed_tokens.weight").ne, (V{4096, 129280}));
    EXPECT_EQ(opt.at("blk.43.nextn.shared_head_head.weight").ne, (V{4096, 129280}));
    for (const auto& s : l.required) EXPECT_EQ(s.layer, 43) << s.name;
}

TEST(MtpLayout, MtpProjIsASelectableClass) {
    EXPECT_EQ(tensor_class_name(TensorClass::MtpProj), "mtp_proj");
    ASSERT_TRUE(tensor_classes_from_name("mtp_proj"));
    EXPECT_EQ(*tensor_classes_from_name("mtp_proj"), std::vector{TensorClass::MtpProj});
    const auto all = *tensor_classes_from_name("all");
    EXPECT_NE(std::find(all.begin(), all.end(), TensorClass::MtpProj), all.end());
}

}  // namespace
}  // namespace ds4::deepseek4
