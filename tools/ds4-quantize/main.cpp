// ds4-quantize (alias deepseek4-quantize): writes a DeepSeek V4 GGUF in another quantization
// mix, from a GGUF (--in) or from the official safetensors release (--hf with a --template
// GGUF for metadata, tensor order and shapes), with llama.cpp's quantizers byte for byte
// (docs/QUANTIZE.md).
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/version.h"
#include "common/error.h"
#include "common/thread_pool.h"
#include "quantize/requantize.h"
#include "quantize/safetensors.h"

namespace {

using namespace ds4;
using namespace ds4::quantize;

constexpr const char* kFooter = R"(Families (a flag not given keeps the template's type; TYPE "copy" says so explicitly):
  --experts         routed w1 + w2 + w3 (ffn_gate_exps, ffn_down_exps, ffn_up_exps)
  --routed-w1/-w3   routed gate / up experts;  --routed-w2  routed down experts
  --attention-proj  attn_q_a, attn_q_b, attn_kv, attn_output_a, attn_output_b
  --attention       every other attention, indexer and compressor matrix
  --shared          shared experts (*_shexp);  --embedding token_embd;  --output output.weight
  --dense           every other matrix (hc_*_fn, output_hc_fn, ffn_gate_inp, MTP projections)
Vectors (norms, sinks, biases, hc base/scale) and I32 tensors are never retyped.
--tensor-type PATTERN=TYPE (repeatable, tried first, in order): PATTERN is an exact name or a
prefix ("blk.40." = all of layer 40), or a glob with '*' ("blk.*.ffn_down_exps.weight").
TYPE: f32, f16, bf16, q8_0, q4_0, q2_k, q4_k, q5_k, q6_k, iq2_xxs, mxfp4 (any case, '_'/'-'
optional). q8_0, q4_0, q2_k, q4_k, q5_k and q6_k are llama.cpp's quantizers byte for byte,
with and without --imatrix; iq2_xxs and mxfp4 are the engine's own.

Examples:
  ds4-quantize --in flash-q4.gguf --out flash-q2.gguf --routed-w1 iq2_xxs --routed-w3 iq2_xxs \
               --routed-w2 q2_k --imatrix routed.dat --threads 8
  ds4-quantize --in flash-q2.gguf --dry-run --experts q4_k
  ds4-quantize --hf DeepSeek-V4-Flash/ --template flash-q2.gguf --compare-tensor blk.0.attn_q_a.weight

Memory stays bounded by the largest tensor (one output tensor plus a few rows per thread); the
output is written under a temporary name and renamed when complete.

Exit status: 0 done (and every compared tensor equal); 1 error; 2 a comparison found
different bytes; other (CLI11's codes): bad command line.)";

struct Args {
    std::string in, hf, tmpl, out, imatrix, compare_tensor, compare_gguf;
    std::string experts, w1, w2, w3, attention_proj, attention, shared, embedding, output, dense;
    std::vector<std::string> tensor_types;
    int threads = 0;
    bool dry_run = false, overwrite = false, quiet = false;
};

Recipe make_recipe(const Args& a) {
    Recipe r;
    auto set = [&r](Family f, const std::string& v) {
        if (!v.empty()) r.family[size_t(f)] = parse_type(v);
    };
    set(Family::RoutedW1, a.experts), set(Family::RoutedW2, a.experts), set(Family::RoutedW3, a.experts);
    set(Family::RoutedW1, a.w1), set(Family::RoutedW2, a.w2), set(Family::RoutedW3, a.w3);
    set(Family::AttentionProj, a.attention_proj), set(Family::Attention, a.attention);
    set(Family::Shared, a.shared), set(Family::Embedding, a.embedding), set(Family::Output, a.output);
    set(Family::Dense, a.dense);
    for (const auto& s : a.tensor_types) r.overrides.push_back(parse_override(s));
    return r;
}

int run(const Args& a) {
    if (a.in.empty() == a.hf.empty()) fail("give exactly one of --in F.gguf and --hf DIR");
    if (!a.hf.empty() && a.tmpl.empty()) fail("--hf needs --template T.gguf (metadata, tensor order and shapes)");
    const bool compare = !a.compare_tensor.empty() || !a.compare_gguf.empty();
    if (!a.dry_run && !compare && a.out.empty()) fail("--out is required unless --dry-run or a comparison is asked");
    if (!a.out.empty() && !a.dry_run && std::filesystem::exists(a.out) && !a.overwrite)
        fail("{} exists; use --overwrite to replace it", a.out);

    const auto tmpl = gguf::File::open(a.in.empty() ? a.tmpl : a.in);
    const Plan plan = make_plan(*tmpl, make_recipe(a));
    std::FILE* log = a.quiet ? nullptr : stderr;
    if (a.dry_run || log) std::fputs(describe(plan).c_str(), a.dry_run ? stdout : log);
    if (a.dry_run) return 0;

    std::optional<Imatrix> imatrix;
    if (!a.imatrix.empty()) imatrix = Imatrix::load(a.imatrix);
    std::unique_ptr<SafetensorsDir> hf;
    if (!a.hf.empty()) hf = std::make_unique<SafetensorsDir>(SafetensorsDir::open(a.hf));
    const int threads = a.threads > 0 ? a.threads : int(std::max(1u, std::thread::hardware_concurrency()));
    std::unique_ptr<ThreadPool> pool;
    if (threads > 1) pool = std::make_unique<ThreadPool>(threads);
    Producer p{*tmpl, hf ? hf->rows() : gguf_rows(*tmpl), !hf, imatrix ? &*imatrix : nullptr, pool.get(), {}, {}};
    if (hf) {
        p.raw = [&hf](const PlanItem& it, std::span<uint8_t> out) { return hf->raw(it, out); };
        p.done = [&hf](const PlanItem&) { hf->release_pages(); };
    }

    int differ = 0;
    if (!a.compare_tensor.empty()) {
        const auto ref = gguf::File::open(a.compare_gguf.empty() ? tmpl->path() : a.compare_gguf);
        differ = compare_output(plan, p, *ref, a.compare_tensor, stdout);
    } else if (!a.out.empty()) {
        write_output(plan, p, a.out, {log, log && isatty(fileno(log)), a.imatrix});
        if (log) std::fprintf(log, "wrote %s (%llu bytes)\n", a.out.c_str(), (unsigned long long)std::filesystem::file_size(a.out));
        if (!a.compare_gguf.empty()) {  // the written file against the reference, tensor by tensor
            const auto written = gguf::File::open(a.out);
            const auto ref = gguf::File::open(a.compare_gguf);
            const Plan same = make_plan(*written, Recipe{});
            differ = compare_output(same, Producer{*written, gguf_rows(*written), true, nullptr, nullptr, {}, {}}, *ref, "", stdout);
        }
    } else {
        const auto ref = gguf::File::open(a.compare_gguf);
        differ = compare_output(plan, p, *ref, "", stdout);
    }
    return differ ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"ds4-quantize: write a DeepSeek V4 GGUF in another quantization mix (llama.cpp's quantizers, "
                 "byte for byte)"};
    ds4::add_version_flag(app, "ds4-quantize");
    app.footer(kFooter);
    app.get_formatter()->column_width(34);
    Args a;
    app.add_option("--in", a.in, "input GGUF to requantise (also the template)");
    app.add_option("--hf", a.hf, "official safetensors directory (model.safetensors.index.json, shards)");
    app.add_option("--template", a.tmpl, "GGUF giving metadata, tensor order and shapes for --hf");
    app.add_option("--out", a.out, "output GGUF");
    app.add_option("--experts,--routed", a.experts, "TYPE of routed w1, w2 and w3");
    app.add_option("--routed-w1,--routed-gate", a.w1, "TYPE of routed gate experts");
    app.add_option("--routed-w2,--routed-down", a.w2, "TYPE of routed down experts");
    app.add_option("--routed-w3,--routed-up", a.w3, "TYPE of routed up experts");
    app.add_option("--attention-proj,--attn-proj", a.attention_proj, "TYPE of attention projections");
    app.add_option("--attention", a.attention, "TYPE of other attention/indexer/compressor matrices");
    app.add_option("--shared", a.shared, "TYPE of shared experts");
    app.add_option("--embedding", a.embedding, "TYPE of token_embd");
    app.add_option("--output", a.output, "TYPE of output.weight");
    app.add_option("--dense", a.dense, "TYPE of every other matrix");
    app.add_option("--tensor-type", a.tensor_types, "PATTERN=TYPE override (repeatable, first match wins)");
    app.add_option("--imatrix", a.imatrix, "importance matrix: llama.cpp legacy .dat or GGUF imatrix");
    app.add_option("--threads,-t", a.threads, "worker threads (default: all cores)")->check(CLI::Range(0, 1024));
    app.add_flag("--dry-run", a.dry_run, "print the plan (sizes per family and total) and exit; reads no tensor data");
    app.add_option("--compare-tensor", a.compare_tensor, "produce one tensor and byte-compare it with --compare-gguf "
                                                         "(default: the template)");
    app.add_option("--compare-gguf", a.compare_gguf, "reference GGUF: with --out, the written file is compared with "
                                                     "it; alone, every produced tensor is");
    app.add_flag("--overwrite", a.overwrite, "replace --out if it exists");
    app.add_flag("-q,--quiet", a.quiet, "no plan or progress on stderr");
    CLI11_PARSE(app, argc, argv);
    try {
        return run(a);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ds4-quantize: error: %s\n", e.what());
        return 1;
    }
}
