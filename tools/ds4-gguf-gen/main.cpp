// ds4-gguf-gen: writes random deepseek4 GGUF models of any shape and quant mix, with exactly
// the tensor names, shapes and metadata keys of the published DeepSeek V4 Flash GGUFs; with
// --arch glm-dsa, GLM 5.2 models instead (glm_main.cpp, its own flags).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <sstream>

#include "common/version.h"
#include "common/cli_checks.h"
#include "common/error.h"
#include "dspark.h"
#include "glm_gen.h"
#include "hf_out.h"
#include "mtp.h"
#include "options.h"
#include "vocab.h"

namespace {

constexpr const char* kFooter = R"(--arch glm-dsa writes GLM 5.2 models instead, with flags of their own: see
ds4-gguf-gen --arch glm-dsa --help.

Presets (individual flags override them):
  tiny   6 layers, ratios 0,0,4,128,4,128, 3 hash layers, n_embd 256, vocab 512, 4 heads x 96
         (rope 32), q_rank 64, o_rank 64 x 2 groups, 8 experts x ff 256 (2 used, 1 shared),
         indexer 2 x 64 top-k 4, window 16, hc 4; all F32. K/IQ types (256-value blocks) work
         for embd, output, hc, router, shared, gate_up_exps, down_exps (exps); dense,
         compressor and indexer rows are 32-multiples (f16/bf16/q8_0/mxfp4).
  small  8 layers, n_embd 512, vocab 4096, 8 heads x 128 (rope 64), q_rank 256, o_rank 128 x 4,
         16 experts x ff 256 (4 used, 1 shared), indexer 4 x 64 top-k 8, window 32; all F16.
         K/IQ types work for every class except compressor.
  flash  the real DeepSeek-V4-Flash shape (n_embd 4096, 64 heads x 512, 256 experts x 2048,
         ...), vocab 129280, ratios 0,0,4,128,4,...,4 truncated to --layers (default 43), and
         the published q2 recipe: iq2_xxs gate/up, q2_k down, q8_0 dense/shared/output, f16
         embd/hc/compressor/indexer/router. With --sparse and no --layers: the full 43-layer
         file (~80.8 GiB apparent size) with holes instead of tensor data.
  pro    the real DeepSeek-V4-Pro shape (docs/spec/ARCHITECTURE.md 1.3): 61 layers, n_embd
         7168, 128 heads x 512 in 16 output groups, q_rank 1536, 384 experts x 3072 (6 used),
         indexer 64 x 128 top-k 1024, routed scale 2.5, vocab 129280, ratios 128,128,4,128,
         4,...,4 (no ratio-0 layer) truncated to --layers (default 61); the same q2 recipe
         as flash. With --sparse and no --layers: the full 61-layer file (~432.7 GiB
         apparent size) with holes instead of tensor data.

Partly filled sparse files (--fill, --fill-experts; both imply --sparse): the classes named are
written whole, routed experts A-B are written (the rest of each expert tensor stays a hole), and
the routing is pinned to them (exp_probs_b + 8 on them, hash layers' tid2eid among them), so a
forward pass reads no hole. --hole NAMES leaves tensors whose names contain one of them holes
anyway (zeros: e.g. attn_output_b,ffn_down zeroes every attention and FFN output, for a bisect).
E.g. the upstream peer check's Flash file (scripts/peer_check.sh):
  --preset flash --real-vocab --fill nonrouted --fill-experts 0-15

Tensor classes for --type CLASS=TYPE (repeatable, applied in order):
  all           every class below
  embd          token_embd
  output        output.weight
  dense         attn_q_a, attn_q_b, attn_kv, attn_output_a, attn_output_b
  shared        ffn_{gate,up,down}_shexp
  gate_up_exps  ffn_gate_exps, ffn_up_exps
  down_exps     ffn_down_exps
  exps          gate_up_exps + down_exps
  hc            hc_attn_fn, hc_ffn_fn, output_hc_fn
  compressor    {attn,indexer}_compressor_{kv,gate,ape}
  indexer       indexer.attn_q_b, indexer.proj
  router        ffn_gate_inp
  mtp_proj      an MTP head's e_proj, h_proj (nextn.eh_proj)
Norms, hc base/scale, attn_sinks and exp_probs_b are always f32, ffn_gate_tid2eid i32.
TYPE: f32 f16 bf16; q8_0 q4_0 mxfp4 (32-value blocks); q2_k q4_k q5_k q6_k iq2_xxs (256-value
blocks). A type's block must divide the row length (ne[0]) of every tensor of its class.

The llama.cpp oracle runs only shapes with --hc 4, --indexer-dim >= 64 and --head-dim !=
--indexer-dim (else it asserts, or rotates the main KV too); the generator warns.

MTP heads: --mtp-out FILE writes one random MTP block (ratio 0, biased routing) with its
projections and head as upstream's support GGUF (general.architecture deepseek4_mtp_support,
tensors mtp.0.*); --mtp-embedded writes the same head into the model file in llama.cpp's
layout (block_count L+1, nextn_predict_layers 1, blk.L.* with blk.L.nextn.eh_proj = [e_proj |
h_proj], enorm, hnorm, shared_head_norm). With one --seed both hold the same weights; the
support file's hc_head_* are the model's output_hc_* (llama.cpp's MTP head mixes with those).
The block's tensors take the types of their classes, e_proj/h_proj those of mtp_proj.

Random vocabularies are written as tokenizer.ggml.model = "none". --real-vocab embeds the
DeepSeek V3 tokenizer.json plus the V4-only tokens at their V4 ids (gpt2 BPE, pre
"joyai-llm"); vocab becomes 129280 unless --vocab is given.
Weights are approximately normal with scale 1/sqrt(fan_in) (norm weights 1 + noise, etc.);
iq2_xxs/q2_k/q4_k/q5_k/q6_k matrices are drawn directly as random blocks with the same RMS unless
--exact-quant. Output is deterministic for a seed (independent of --threads).)";

std::vector<uint32_t> parse_ratios(const std::string& s) {
    std::vector<uint32_t> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        try {
            size_t used = 0;
            const unsigned long v = std::stoul(item, &used);
            if (used != item.size()) throw std::invalid_argument(item);
            out.push_back(uint32_t(v));
        } catch (const std::exception&) {
            ds4::fail("--ratios: '{}' is not a number (expected e.g. 0,0,4,128)", item);
        }
    }
    return out;
}

// True when the command line asks for --arch glm-dsa (either spelling).
bool wants_glm(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--arch=glm-dsa" || (a == "--arch" && i + 1 < argc && std::string(argv[i + 1]) == "glm-dsa"))
            return true;
    }
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    if (wants_glm(argc, argv)) return ds4::gen::glm_main(argc, argv);
    CLI::App app{"ds4-gguf-gen: write a random deepseek4 GGUF model"};
    ds4::add_version_flag(app, "ds4-gguf-gen");
    app.footer(kFooter);
    app.get_formatter()->column_width(34);

    std::string out, preset = "tiny", ratios, tokenizer_json, dspark_out;
    uint64_t seed = 1;
    bool real_vocab = false, sparse = false, quiet = false, exact_quant = false;
    int threads = 0;
    std::vector<std::string> types;
    std::string arch = "deepseek4";
    app.add_option("--arch", arch, "deepseek4 | glm-dsa (its own flags: --arch glm-dsa --help)")
        ->check(CLI::IsMember({"deepseek4", "glm-dsa"}))
        ->capture_default_str();
    app.add_option("-o,--output", out, "output file")->required();
    app.add_option("--preset", preset, "tiny | small | flash | pro")->capture_default_str();
    app.add_option("--seed", seed, "random seed")->capture_default_str();

    struct U32Flag {
        const char* name;
        const char* help;
        std::optional<uint32_t> ds4::gen::Overrides::*field;
        uint32_t value = 0;
        CLI::Option* opt = nullptr;
    };
    using O = ds4::gen::Overrides;
    std::vector<U32Flag> flags = {
        {"--layers", "transformer blocks", &O::layers},
        {"--hash-layers", "hash-routed layers (the first N)", &O::hash_layers},
        {"--embd", "n_embd", &O::embd},
        {"--vocab", "vocabulary size", &O::vocab},
        {"--heads", "attention heads", &O::heads},
        {"--head-dim", "head dim (key = value length)", &O::head_dim},
        {"--rope-dim", "rotary dims (the last N of a head)", &O::rope_dim},
        {"--q-rank", "q LoRA rank", &O::q_rank},
        {"--o-rank", "output LoRA rank per group", &O::o_rank},
        {"--o-groups", "output groups", &O::o_groups},
        {"--experts", "routed experts", &O::experts},
        {"--experts-used", "experts per token", &O::experts_used},
        {"--shared-experts", "shared experts", &O::shared_experts},
        {"--ff", "expert feed-forward length", &O::ff},
        {"--indexer-heads", "indexer heads", &O::indexer_heads},
        {"--indexer-dim", "indexer head dim (power of two)", &O::indexer_dim},
        {"--indexer-top-k", "indexer top-k", &O::indexer_top_k},
        {"--window", "sliding window", &O::window},
        {"--hc", "hyper-connection streams", &O::hc},
    };
    for (auto& f : flags) f.opt = app.add_option(f.name, f.value, f.help);
    uint64_t ctx = 0;
    CLI::Option* ctx_opt = app.add_option("--ctx", ctx, "context_length metadata");
    CLI::Option* ratios_opt =
        app.add_option("--ratios", ratios, "compress ratio per layer, e.g. 0,0,4,128");
    app.add_option("--type", types, "CLASS=TYPE storage type of a tensor class (see below)");
    app.add_flag("--real-vocab", real_vocab, "embed the real DeepSeek V4 vocabulary");
    app.add_option("--tokenizer-json", tokenizer_json,
                   "tokenizer.json for --real-vocab (default: the oracle cache)");
    app.add_flag("--sparse", sparse, "leave tensor data as holes (sparse file)");
    app.add_flag("--exact-quant", exact_quant,
                 "iq2_xxs/q2_k/q4_k/q5_k/q6_k: quantize normal rows (slow) instead of random blocks");
    app.add_option("--threads", threads, "threads for generation (default 0: all cores)")
        ->check(ds4::cli_checks::thread_count());
    app.add_option("--dspark-out", dspark_out,
                   "also write a random DSpark support GGUF for this model (docs/SPECULATIVE.md)");
    std::string mtp_out;
    bool mtp_embedded = false;
    app.add_option("--mtp-out", mtp_out, "also write a random MTP head as upstream's MTP support GGUF");
    app.add_flag("--mtp-embedded", mtp_embedded,
                 "put the same MTP head into the model file (llama.cpp's blk.<L>.nextn layout)");
    app.add_flag("-q,--quiet", quiet, "no progress output");
    std::string hf_out, hf_dtypes = "official";
    app.add_option("--hf-out", hf_out, "also write the same weights as an official-style safetensors directory");
    app.add_option("--hf-dtypes", hf_dtypes, "official (FP8/FP4/BF16 as the release) | f32 (exact values)")
        ->check(CLI::IsMember({"official", "f32"}))
        ->capture_default_str();
    std::string fill, fill_experts;
    app.add_option("--fill", fill,
                   "sparse, but write these classes (comma list: --type classes, nonrouted, norm, tid2eid)");
    app.add_option("--fill-experts", fill_experts,
                   "sparse, but write routed experts A-B and pin the routing to them (e.g. 0-15)");
    std::string holes;
    app.add_option("--hole", holes, "with --fill: leave tensors whose names contain these parts (comma list) holes");
    CLI11_PARSE(app, argc, argv);
    if (!fill.empty() || !fill_experts.empty()) sparse = true;

    try {
        O ov;
        for (auto& f : flags)
            if (f.opt->count()) ov.*(f.field) = f.value;
        if (ctx_opt->count()) ov.ctx = ctx;
        if (ratios_opt->count()) ov.ratios = parse_ratios(ratios);
        ov.types = types;

        // --preset flash|pro --sparse without --layers: the full published shape.
        ds4::gen::GenPlan plan = ds4::gen::make_plan(preset, ov, seed, real_vocab, sparse);
        if (threads > 0) plan.threads = threads;
        plan.exact_quant = exact_quant;
        if (!fill.empty()) ds4::gen::add_fill_classes(plan.fill, fill);
        if (!holes.empty()) ds4::gen::add_holes(plan.fill, holes);
        if (!fill_experts.empty())
            ds4::gen::set_fill_experts(plan.fill, fill_experts, plan.cfg.n_expert, plan.cfg.n_expert_used);
        ds4::gen::enable_mtp(plan, mtp_embedded, mtp_out, out);
        if (real_vocab)
            plan.tokenizer_json =
                tokenizer_json.empty() ? ds4::gen::default_tokenizer_json() : tokenizer_json;
        std::FILE* log = quiet ? nullptr : stderr;
        if (log) {
            std::fprintf(log, "%s\n", ds4::gen::describe(plan).c_str());
            const auto& c = plan.cfg;
            if (c.head_dim == c.indexer_dim)
                std::fprintf(log, "warning: head_dim == indexer_dim (%u): llama.cpp then also "
                                  "applies the indexer's Hadamard rotation to the main KV\n",
                             c.head_dim);
            if (c.indexer_dim < 64)
                std::fprintf(log, "warning: indexer_dim %u < 64: llama.cpp has no Hadamard "
                                  "matrix that small and cannot run this model\n",
                             c.indexer_dim);
            if (c.hc != 4)
                std::fprintf(log, "warning: hc %u != 4: llama.cpp asserts hc == 4 and cannot "
                                  "run this model\n",
                             c.hc);
        }
        ds4::gen::generate(plan, out, log);
        if (!dspark_out.empty()) ds4::gen::generate_dspark(plan, dspark_out, log);
        if (!hf_out.empty())
            ds4::gen::write_hf(plan, hf_out, hf_dtypes == "f32" ? ds4::gen::HfDtypes::F32 : ds4::gen::HfDtypes::Official, log);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ds4-gguf-gen: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
