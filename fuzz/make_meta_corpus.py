#!/usr/bin/env python3
"""Writes the seed corpus for fuzz_model_meta into fuzz/corpus/model_meta/.

Seeds built with make_gguf_corpus.gguf() (independently of our C++ writer): a deepseek4
configuration with an embedded MTP block (block_count = layers + 1, nextn_predict_layers = 1,
the tiny preset's shape, no tokenizer arrays), DSpark metadata under each key spelling, a few
MTP head tensors, and broken variants (a target layer out of range, a wrong array type); and a
glm-dsa configuration (the generator's tiny preset's keys, with its indexer types array) with a
few layer tensors, plus variants (no types array: the default rule; shared layer 0).
"""
import os

from make_gguf_corpus import ARR, BOOL, F32, I32, STR, U32, gguf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "model_meta")

# The tiny preset's deepseek4 keys (ds4-gguf-gen --preset tiny --mtp-embedded), 6 + 1 blocks.
A = "deepseek4."
CONFIG = [
    ("general.architecture", STR, "deepseek4"),
    (A + "block_count", U32, 7), (A + "nextn_predict_layers", U32, 1),
    (A + "context_length", U32, 4096), (A + "embedding_length", U32, 256), (A + "vocab_size", U32, 512),
    (A + "attention.head_count", U32, 4), (A + "attention.head_count_kv", U32, 1),
    (A + "attention.key_length", U32, 96), (A + "attention.value_length", U32, 96),
    (A + "rope.dimension_count", U32, 32), (A + "attention.q_lora_rank", U32, 64),
    (A + "attention.output_lora_rank", U32, 64), (A + "attention.output_group_count", U32, 2),
    (A + "attention.sliding_window", U32, 16),
    (A + "attention.indexer.head_count", U32, 2), (A + "attention.indexer.key_length", U32, 64),
    (A + "attention.indexer.top_k", U32, 4),
    (A + "attention.compress_ratios", ARR, (I32, [0, 0, 4, 128, 4, 128, 0])),
    (A + "attention.compress_rope_freq_base", F32, 160000.0),
    (A + "attention.layer_norm_rms_epsilon", F32, 1e-6),
    (A + "expert_count", U32, 8), (A + "expert_used_count", U32, 2), (A + "expert_shared_count", U32, 1),
    (A + "expert_feed_forward_length", U32, 256), (A + "expert_weights_scale", F32, 1.5),
    (A + "expert_weights_norm", BOOL, 1), (A + "expert_gating_func", U32, 4), (A + "hash_layer_count", U32, 3),
    (A + "swiglu_clamp_exp", ARR, (F32, [10.0] * 7)),
    (A + "hyper_connection.count", U32, 4), (A + "hyper_connection.sinkhorn_iterations", U32, 20),
    (A + "hyper_connection.epsilon", F32, 1e-6), (A + "rope.freq_base", F32, 10000.0),
    (A + "rope.scaling.type", STR, "yarn"), (A + "rope.scaling.factor", F32, 16.0),
    (A + "rope.scaling.original_context_length", U32, 65536), (A + "rope.scaling.yarn_beta_fast", F32, 32.0),
    (A + "rope.scaling.yarn_beta_slow", F32, 1.0),
]


# The tiny glm-dsa preset's keys (ds4-gguf-gen --arch glm-dsa --preset tiny --mtp), 5 + 1 blocks.
G = "glm-dsa."
GLM = [
    ("general.architecture", STR, "glm-dsa"),
    (G + "block_count", U32, 6), (G + "nextn_predict_layers", U32, 1), (G + "context_length", U32, 4096),
    (G + "embedding_length", U32, 256), (G + "feed_forward_length", U32, 256), (G + "vocab_size", U32, 512),
    (G + "attention.head_count", U32, 4), (G + "attention.head_count_kv", U32, 1),
    (G + "attention.key_length", U32, 96), (G + "attention.value_length", U32, 64),
    (G + "attention.key_length_mla", U32, 96), (G + "attention.value_length_mla", U32, 64),
    (G + "attention.q_lora_rank", U32, 64), (G + "attention.kv_lora_rank", U32, 64),
    (G + "attention.layer_norm_rms_epsilon", F32, 1e-5), (G + "attention.layer_norm_epsilon", F32, 0.0),
    (G + "attention.indexer.head_count", U32, 2), (G + "attention.indexer.key_length", U32, 64),
    (G + "attention.indexer.top_k", U32, 8), (G + "attention.indexer.types", ARR, (BOOL, [1, 1, 0, 1, 0])),
    (G + "rope.dimension_count", U32, 32), (G + "rope.freq_base", F32, 8000000.0),
    (G + "leading_dense_block_count", U32, 1), (G + "expert_count", U32, 4), (G + "expert_used_count", U32, 2),
    (G + "expert_shared_count", U32, 1), (G + "expert_feed_forward_length", U32, 256),
    (G + "expert_weights_scale", F32, 2.5), (G + "expert_weights_norm", BOOL, 1), (G + "expert_gating_func", U32, 2),
]


def dspark(prefix, layers=(3, 4, 5), layer_type=U32):
    return [(prefix + "block_size", U32, 5), (prefix + "markov_rank", U32, 32),
            (prefix + "noise_token_id", U32, 511), (prefix + "target_layer_ids", ARR, (layer_type, list(layers)))]


def main():
    os.makedirs(OUT, exist_ok=True)
    head = [("mtp.0.enorm.weight", 0, [256]), ("mtp.0.hnorm.weight", 0, [256]), ("mtp.0.hc_head_base.weight", 0, [4]),
            ("blk.6.nextn.enorm.weight", 0, [256]), ("blk.6.nextn.hnorm.weight", 0, [256])]
    seeds = {
        "config_nextn.gguf": gguf(CONFIG, []),
        "config_nextn_head.gguf": gguf(CONFIG, head),
        "dspark_converter.gguf": gguf([("general.architecture", STR, "deepseek4-dspark")] + dspark("dspark."), []),
        "dspark_prefixed.gguf": gguf(CONFIG + dspark("deepseek4.dspark.", layer_type=I32), []),
        "dspark_underscore.gguf": gguf(CONFIG + dspark("deepseek4.dspark_"), head),
        "broken_dspark_layer.gguf": gguf(CONFIG + dspark("dspark.", layers=(5, 4, 99)), []),
        "broken_dspark_type.gguf": gguf(CONFIG + [("dspark.block_size", STR, "5")] + dspark("dspark.")[1:], []),
        "glm_config.gguf": gguf(GLM, [("blk.0.attn_norm.weight", 0, [256]), ("blk.0.attn_kv_a_norm.weight", 0, [64]),
                                      ("blk.5.nextn.enorm.weight", 0, [256])]),
        "glm_default_types.gguf": gguf([e for e in GLM if not e[0].endswith("indexer.types")], []),
        "broken_glm_types.gguf": gguf([(k, t, (BOOL, [0, 1, 0, 1, 0]) if k.endswith("indexer.types") else v)
                                       for k, t, v in GLM], []),
        # A newline in the architecture must not break the one-line error (found by this target).
        "broken_arch_newline.gguf": gguf([("general.architecture", STR, "dee\nseek4-dspark")] + dspark("dspark."), []),
        "broken_nextn.gguf": gguf([(k, t, 9 if k.endswith("nextn_predict_layers") else v) for k, t, v in CONFIG], []),
    }
    total = 0
    for name, data in sorted(seeds.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        total += len(data)
    print(f"wrote {len(seeds)} seeds, {total} bytes, to {OUT}")


if __name__ == "__main__":
    main()
