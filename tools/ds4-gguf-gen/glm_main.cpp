// The command line of `ds4-gguf-gen --arch glm-dsa` (docs/GGUF_GEN.md, "GLM 5.2").
#include <CLI/CLI.hpp>

#include <cstdio>
#include <sstream>

#include "common/version.h"
#include "common/cli_checks.h"
#include "common/error.h"
#include "glm_gen.h"

namespace ds4::gen {

namespace {

constexpr const char* kGlmFooter = R"(Presets (individual flags override them):
  tiny   5 layers (1 dense lead layer), indexer types 1,1,0,1,0 (layer 0 and odd layers full),
         n_embd 256, vocab 512, 4 heads, q_lora 64, kv_lora 64, nope 64 + rope 32, v_head 64,
         indexer 2 x 64 top-k 8, dense ff 256, 4 experts x ff 256 (2 used, 1 shared),
         context 4096; all F32 (~20 MB). K/IQ types (256-value blocks) work for embd, output,
         dense_ffn, shared, exps, router and mtp_proj; attn and indexer rows are 32-multiples.
  glm52  the real GLM 5.2 shape (78 layers, 3 dense, n_embd 6144, vocab 154880, 64 heads,
         q_lora 2048, kv_lora 512, nope 192 + rope 64, v_head 256, indexer 32 x 128 top-k 2048,
         256 experts x 2048 (8 used, 1 shared), dense ff 12288, context 1M, GLM 5.2's indexer
         pattern), truncated to --layers, with a q2-style recipe: q2_k gate_up_exps, q4_k
         down_exps, f32 indexer and router, q8_0 everything else. With --sparse and no
         --layers: the full 78-layer file with holes instead of tensor data.

Tensor classes for --type CLASS=TYPE (repeatable, applied in order):
  all           every class below
  embd          token_embd
  output        output.weight
  attn          attn_q_a, attn_q_b, attn_kv_a_mqa, attn_k_b, attn_v_b, attn_output
  indexer       indexer.attn_k, indexer.attn_q_b, indexer.proj
  dense_ffn     the dense lead layers' ffn_{gate,up,down}
  shared        ffn_{gate,up,down}_shexp
  gate_up_exps  ffn_gate_exps, ffn_up_exps
  down_exps     ffn_down_exps
  exps          gate_up_exps + down_exps
  router        ffn_gate_inp
  mtp_proj      the MTP block's nextn.eh_proj
Norms, the indexer key norm's bias and exp_probs_b are always f32. A type's block must divide
the row length (ne[0]) of every tensor of its class.

--indexer-types 1,1,0,...: per layer, 1 = computes its own top-k (has indexer tensors), 0 =
reuses the last full layer's; entry 0 must be 1. Default: tiny's pattern, or llama.cpp's rule
(every layer below a 1M context; GLM 5.2's table at 1M and above).
--mtp: the embedded MTP block blk.<L> (block_count L+1, nextn_predict_layers 1): a routed
layer with indexer tensors plus nextn.eh_proj, enorm, hnorm, shared_head_norm.
--indexer-ln-eps F: attention.layer_norm_epsilon (the indexer key LayerNorm); llama.cpp ignores
the key and uses 0, so the oracle tests write 0.

The llama.cpp oracle runs only shapes with --indexer-dim = 64 x 2^k and kv_lora + rope-dim !=
indexer-dim; the generator warns. The tokenizer is a glm4-style byte-level BPE (GLM's added
tokens in the last 60 ids, at their real ids for vocab 154880); vocab must be >= 316.)";

std::vector<uint8_t> parse_indexer_types(const std::string& s) {
    std::vector<uint8_t> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item != "0" && item != "1") fail("--indexer-types: '{}' is not 0 or 1 (expected e.g. 1,1,0,1)", item);
        out.push_back(item == "1");
    }
    return out;
}

}  // namespace

int glm_main(int argc, char** argv) {
    CLI::App app{"ds4-gguf-gen --arch glm-dsa: write a random GLM 5.2 (glm-dsa) GGUF model"};
    ds4::add_version_flag(app, "ds4-gguf-gen");
    app.footer(kGlmFooter);
    app.get_formatter()->column_width(34);

    std::string out, preset = "tiny", arch, indexer_types;
    uint64_t seed = 1;
    bool sparse = false, quiet = false, exact_quant = false, mtp = false;
    int threads = 0;
    std::vector<std::string> types;
    app.add_option("--arch", arch, "glm-dsa")->check(CLI::IsMember({"glm-dsa"}));
    app.add_option("-o,--output", out, "output file")->required();
    app.add_option("--preset", preset, "tiny | glm52")->capture_default_str();
    app.add_option("--seed", seed, "random seed")->capture_default_str();

    struct U32Flag {
        const char* name;
        const char* help;
        std::optional<uint32_t> GlmOverrides::*field;
        uint32_t value = 0;
        CLI::Option* opt = nullptr;
    };
    using O = GlmOverrides;
    std::vector<U32Flag> flags = {
        {"--layers", "trunk layers", &O::layers},
        {"--embd", "n_embd", &O::embd},
        {"--vocab", "vocabulary size (>= 316)", &O::vocab},
        {"--heads", "attention heads", &O::heads},
        {"--q-lora,--q-rank", "q LoRA rank", &O::q_lora},
        {"--kv-lora", "KV LoRA rank (latent row width)", &O::kv_lora},
        {"--nope", "a query head's non-rope dims", &O::nope},
        {"--rope-dim", "rotary dims", &O::rope_dim},
        {"--v-head", "value head dim", &O::v_head},
        {"--experts", "routed experts", &O::experts},
        {"--experts-used", "experts per token", &O::experts_used},
        {"--shared-experts", "shared experts", &O::shared_experts},
        {"--ff", "expert feed-forward length", &O::ff},
        {"--dense-lead", "leading dense layers", &O::dense_lead},
        {"--dense-ff", "dense layers' feed-forward length", &O::dense_ff},
        {"--indexer-heads", "indexer heads", &O::indexer_heads},
        {"--indexer-dim", "indexer head dim (64 x 2^k)", &O::indexer_dim},
        {"--indexer-top-k", "indexer top-k", &O::indexer_top_k},
    };
    for (auto& f : flags) f.opt = app.add_option(f.name, f.value, f.help);
    uint64_t ctx = 0;
    float ln_eps = 0.0f;
    CLI::Option* ctx_opt = app.add_option("--ctx", ctx, "context_length metadata");
    CLI::Option* types_opt = app.add_option("--indexer-types", indexer_types, "per layer 1 (full) or 0 (shared)");
    CLI::Option* eps_opt = app.add_option("--indexer-ln-eps", ln_eps, "indexer key LayerNorm epsilon (default 1e-6)");
    app.add_option("--type", types, "CLASS=TYPE storage type of a tensor class (see below)");
    app.add_flag("--mtp,--mtp-embedded", mtp, "with the embedded MTP block (blk.<layers>.nextn.*)");
    app.add_flag("--sparse", sparse, "leave tensor data as holes (sparse file)");
    app.add_flag("--exact-quant", exact_quant, "K/IQ types: quantize normal rows (slow) instead of random blocks");
    app.add_option("--threads", threads, "threads for generation (default 0: all cores)")
        ->check(cli_checks::thread_count());
    app.add_flag("-q,--quiet", quiet, "no progress output");
    CLI11_PARSE(app, argc, argv);

    try {
        O ov;
        for (auto& f : flags)
            if (f.opt->count()) ov.*(f.field) = f.value;
        if (ctx_opt->count()) ov.ctx = ctx;
        if (types_opt->count()) ov.indexer_types = parse_indexer_types(indexer_types);
        if (eps_opt->count()) ov.indexer_ln_eps = ln_eps;
        ov.types = types;
        GlmPlan plan = make_glm_plan(preset, ov, seed, sparse, mtp);
        if (threads > 0) plan.threads = threads;
        plan.exact_quant = exact_quant;
        std::FILE* log = quiet ? nullptr : stderr;
        if (log) {
            std::fprintf(log, "%s\n", describe_glm(plan).c_str());
            for (const std::string& w : glm_oracle_warnings(plan.cfg)) std::fprintf(log, "warning: %s\n", w.c_str());
        }
        generate_glm(plan, out, log);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ds4-gguf-gen: error: %s\n", e.what());
        return 1;
    }
    return 0;
}

}  // namespace ds4::gen
