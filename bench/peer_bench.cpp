// ds4-peer-bench: the ds4-bench frontier walk (tools/ds4-bench/frontier.h) run by llama.cpp,
// the oracle's prebuilt libraries, at its fastest CPU settings: F16 KV cache, flash attention
// on "auto", weight repacking (extra buffer types) allowed, n_batch = n_ubatch = 512. It writes
// the same CSV columns and table as ds4-bench, so bench/side_by_side.sh can compare the two.
//
//   ds4-peer-bench -m MODEL --token-ids FILE [--ctx-start N --ctx-max N --step-incr N
//                  --gen-tokens N --threads N --csv OUT]
//
// Prefill of each interval goes through llama_decode in n_batch pieces with only the last
// token's logits requested. The decode probe is undone with llama_state_seq_get_data /
// set_data (the DSV4 cache cannot roll back more than its n_rs_seq positions with seq_rm).
// kvcache_bytes is llama_state_seq_get_size(), the serialized state of the sequence.
#include <CLI/CLI.hpp>
#include <algorithm>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "frontend/token_ids.h"
#include "frontier.h"
#include "ggml-backend.h"
#include "llama.h"
#include "report.h"

namespace {

using ds4::fail;

struct Options {
    std::string model;
    std::string token_ids;
    ds4::bench::SweepShape shape;
    std::string csv;
    std::string dump_probe_ids;
    int threads = 2;
    int64_t ctx = 0;
    int batch = 512;
    int ubatch = 0;  // 0: = batch
    int64_t warmup = 0;  // untimed prefill of the first N tokens, then the memory cleared
    std::string kv_type = "f16";
    std::string flash_attn = "auto";
    bool no_repack = false;
    bool no_mmap = false;
    bool verbose = false;
    std::string backend_dir = DS4_ORACLE_BIN;
};

bool g_verbose = false;
void log_callback(ggml_log_level level, const char* text, void*) {
    static ggml_log_level last = GGML_LOG_LEVEL_NONE;
    if (level != GGML_LOG_LEVEL_CONT) last = level;
    if (g_verbose || last == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

ggml_type kv_type(const std::string& name) {
    if (name == "f16") return GGML_TYPE_F16;
    if (name == "f32") return GGML_TYPE_F32;
    if (name == "bf16") return GGML_TYPE_BF16;
    if (name == "q8_0") return GGML_TYPE_Q8_0;
    fail("--kv-type '{}': expected f16, f32, bf16 or q8_0", name);
}

llama_flash_attn_type flash_attn(const std::string& name) {
    if (name == "auto") return LLAMA_FLASH_ATTN_TYPE_AUTO;
    if (name == "on") return LLAMA_FLASH_ATTN_TYPE_ENABLED;
    if (name == "off") return LLAMA_FLASH_ATTN_TYPE_DISABLED;
    fail("--flash-attn '{}': expected auto, on or off", name);
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

class Peer {
public:
    Peer(const Options& o, int64_t n_ctx) : o_(o) {
        ggml_backend_load_all_from_path(o.backend_dir.c_str());
        llama_backend_init();
        llama_model_params mp = llama_model_default_params();
        mp.n_gpu_layers = 0;
        mp.use_extra_bufts = !o.no_repack;
        if (o.no_mmap) mp.load_mode = LLAMA_LOAD_MODE_NONE;  // read, not mapped (default: auto)
        model_.reset(llama_model_load_from_file(o.model.c_str(), mp));
        if (!model_) fail("{}: llama.cpp could not load the model (--verbose shows its log)", o.model);
        vocab_ = llama_model_get_vocab(model_.get());
        n_vocab_ = llama_vocab_n_tokens(vocab_);

        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = uint32_t(n_ctx);
        cp.n_batch = uint32_t(o.batch);
        cp.n_ubatch = uint32_t(o.ubatch > 0 ? o.ubatch : o.batch);
        cp.n_seq_max = 1;
        cp.n_threads = o.threads;
        cp.n_threads_batch = o.threads;
        cp.flash_attn_type = flash_attn(o.flash_attn);
        cp.type_k = kv_type(o.kv_type);
        cp.type_v = cp.type_k;
        cp.no_perf = true;
        ctx_.reset(llama_init_from_model(model_.get(), cp));
        if (!ctx_) fail("{}: llama.cpp could not create a context (n_ctx {})", o.model, n_ctx);
        if (int64_t(llama_n_ctx(ctx_.get())) < n_ctx)
            fail("llama.cpp gave a context of {} < {} positions", llama_n_ctx(ctx_.get()), n_ctx);
        batch_ = llama_batch_init(o.batch, 0, 1);
    }
    ~Peer() { llama_batch_free(batch_); }

    int64_t n_vocab() const { return n_vocab_; }
    int32_t eos() const { return llama_vocab_eos(vocab_); }  // LLAMA_TOKEN_NULL (-1) if none

    // Evaluates tokens[0, n) at positions pos0 .. pos0+n-1 in n_batch pieces; returns the
    // last token's logits (the only ones requested).
    const float* eval(const int32_t* tokens, int64_t n, int64_t pos0) {
        for (int64_t b = 0; b < n; b += o_.batch) {
            const int len = int(std::min<int64_t>(o_.batch, n - b));
            batch_.n_tokens = len;
            for (int i = 0; i < len; ++i) {
                batch_.token[i] = tokens[b + i];
                batch_.pos[i] = llama_pos(pos0 + b + i);
                batch_.n_seq_id[i] = 1;
                batch_.seq_id[i][0] = 0;
                batch_.logits[i] = b + i == n - 1;
            }
            const int rc = llama_decode(ctx_.get(), batch_);
            if (rc != 0) fail("llama_decode failed ({}) at position {}", rc, pos0 + b);
        }
        const float* row = llama_get_logits_ith(ctx_.get(), -1);
        if (row == nullptr) fail("llama.cpp returned no logits at position {}", pos0 + n - 1);
        return row;
    }

    void clear() { llama_memory_clear(llama_get_memory(ctx_.get()), true); }

    size_t state_size() { return llama_state_seq_get_size(ctx_.get(), 0); }
    std::vector<uint8_t> save() {
        std::vector<uint8_t> buf(state_size());
        if (llama_state_seq_get_data(ctx_.get(), buf.data(), buf.size(), 0) != buf.size())
            fail("llama_state_seq_get_data wrote an unexpected size");
        return buf;
    }
    void restore(const std::vector<uint8_t>& buf) {
        if (llama_state_seq_set_data(ctx_.get(), buf.data(), buf.size(), 0) == 0)
            fail("llama_state_seq_set_data failed to restore the frontier");
    }

private:
    const Options& o_;
    std::unique_ptr<llama_model, void (*)(llama_model*)> model_{nullptr, &llama_model_free};
    std::unique_ptr<llama_context, void (*)(llama_context*)> ctx_{nullptr, &llama_free};
    const llama_vocab* vocab_ = nullptr;
    int64_t n_vocab_ = 0;
    llama_batch batch_{};
};

int run(const Options& o) {
    g_verbose = o.verbose;
    llama_log_set(log_callback, nullptr);
    ggml_log_set(log_callback, nullptr);
    const std::vector<int32_t> ids = ds4::frontend::read_token_ids(o.token_ids);
    const std::vector<int64_t> fronts = ds4::bench::frontiers(o.shape);
    const int64_t need = ds4::bench::context_needed(o.shape);
    const int64_t n_ctx = o.ctx > 0 ? o.ctx : need;
    if (n_ctx < need)
        fail("--ctx {} is too small: the last frontier {} plus --gen-tokens {} needs {}", n_ctx,
             fronts.back(), o.shape.gen_tokens, need);
    if (o.batch <= 0) fail("--batch must be positive (got {})", o.batch);

    Peer peer(o, n_ctx);
    ds4::bench::check_sequence(ids, o.shape, peer.n_vocab(), o.token_ids);
    std::printf("ds4-peer-bench: llama.cpp, %s, %zu tokens, %zu frontiers, %d threads, ctx %lld, "
                "batch %d, KV %s, flash attention %s, repack %s, %s\n",
                o.model.c_str(), ids.size(), fronts.size(), o.threads,
                static_cast<long long>(n_ctx), o.batch, o.kv_type.c_str(), o.flash_attn.c_str(),
                o.no_repack ? "off" : "on", o.no_mmap ? "weights read" : "weights mapped");
    ds4::bench::CsvWriter csv(o.csv);
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> probes(nullptr, &std::fclose);
    if (!o.dump_probe_ids.empty()) {
        probes.reset(std::fopen(o.dump_probe_ids.c_str(), "w"));
        if (!probes) fail("--dump-probe-ids {}: cannot open for writing", o.dump_probe_ids);
    }
    ds4::bench::print_table_header(stdout);

    const int64_t V = peer.n_vocab();
    std::vector<float> logits(static_cast<size_t>(V));
    if (o.warmup > 0) {  // as ds4-bench --warmup
        peer.eval(ids.data(), std::min({o.warmup, int64_t(ids.size()), n_ctx}), 0);
        peer.clear();
    }
    int64_t done = 0;
    for (const int64_t f : fronts) {
        ds4::bench::Row r;
        r.ctx_tokens = f;
        r.prefill_tokens = f - done;
        const auto t0 = Clock::now();
        const float* last = peer.eval(ids.data() + done, f - done, done);
        r.prefill_tps = double(r.prefill_tokens) / seconds_since(t0);
        logits.assign(last, last + V);
        done = f;
        r.kvcache_bytes = int64_t(peer.state_size());

        r.gen_tokens = o.shape.gen_tokens;
        std::vector<int32_t> probe;
        if (r.gen_tokens > 0) {
            std::vector<uint8_t> snap;
            if (f != fronts.back()) snap = peer.save();
            const auto t1 = Clock::now();
            int32_t next = ds4::bench::greedy_non_eos(logits.data(), V, peer.eos());
            for (int64_t i = 0; i < r.gen_tokens; ++i) {
                probe.push_back(next);
                const float* row = peer.eval(&next, 1, f + i);
                next = ds4::bench::greedy_non_eos(row, V, peer.eos());
            }
            r.gen_tps = double(r.gen_tokens) / seconds_since(t1);
            if (!snap.empty()) peer.restore(snap);
        }
        ds4::bench::print_table_row(stdout, r);
        csv.add(r);
        if (probes) {
            for (size_t i = 0; i < probe.size(); ++i)
                std::fprintf(probes.get(), i ? " %d" : "%d", probe[i]);
            std::fprintf(probes.get(), "\n");
            std::fflush(probes.get());
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"ds4-peer-bench: the ds4-bench frontier walk run by llama.cpp (the oracle's "
                 "prebuilt libraries) at its fastest CPU settings", "ds4-peer-bench"};
    app.get_formatter()->column_width(30);
    app.add_option("-m,--model", o.model, "GGUF model file")->required()->option_text("FILE");
    app.add_option("--token-ids", o.token_ids, "Whitespace-separated token ids to walk")
        ->required()->option_text("FILE");
    app.add_option("--ctx-start", o.shape.ctx_start, "First frontier (default 2048)");
    app.add_option("--ctx-max", o.shape.ctx_max, "Last frontier (default 32768)");
    app.add_option("--step-incr", o.shape.step_incr, "Distance between frontiers (default 2048)");
    app.add_option("--gen-tokens", o.shape.gen_tokens, "Greedy decode probe length (default 128)");
    app.add_option("--csv", o.csv, "Write the ds4-bench CSV columns")->option_text("OUT");
    app.add_option("--dump-probe-ids", o.dump_probe_ids, "Write each probe's greedy ids")
        ->option_text("FILE");
    app.add_option("-t,--threads", o.threads, "n_threads = n_threads_batch (default 2)")
        ->check(CLI::PositiveNumber);
    app.add_option("-c,--ctx", o.ctx, "n_ctx (default: the last frontier + --gen-tokens)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--batch", o.batch, "n_batch (default 512)")->check(CLI::PositiveNumber);
    app.add_option("--ubatch", o.ubatch, "n_ubatch (default: = --batch)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--warmup", o.warmup,
                   "Prefill the first N tokens untimed, then clear the memory (default 0)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--kv-type", o.kv_type, "KV cache type: f16 (default), f32, bf16, q8_0");
    app.add_option("--flash-attn", o.flash_attn, "auto (default), on or off");
    app.add_flag("--no-repack", o.no_repack, "Keep weights in their file layout (no extra buffers)");
    app.add_flag("--no-mmap", o.no_mmap, "Read the weights into memory instead of mapping the file");
    app.add_option("--backend-dir", o.backend_dir, "Where the ggml CPU backends are")
        ->option_text("DIR");
    app.add_flag("-v,--verbose", o.verbose, "Show llama.cpp's log");
    CLI11_PARSE(app, argc, argv);
    try {
        return run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ds4-peer-bench: %s\n", e.what());
    }
    return 1;
}
