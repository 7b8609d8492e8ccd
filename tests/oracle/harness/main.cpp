// ds4-oracle: runs a deepseek4 or glm-dsa GGUF through the llama.cpp oracle (the prebuilt
// libraries in .cache/oracle/bin) with the settings of spec/ORACLE.md that make it exact, and
// writes the logits of every position as raw little-endian float32 [n_tokens][n_vocab].
// Test-only; see docs/ORACLE_HARNESS.md. Both architectures run with the same settings (F32 KV,
// flash attention off, no repack, one ubatch per call); the architecture only changes what
// --mode mtp reads as the trunk's hidden state and which nodes --dump-indexer reads (capture.h).
//
// --mode mtp: the MTP head of a model with one (llama.cpp's layout: blk.<L>.nextn.*, loaded with
// load_mtp). The trunk runs over the tokens once, and the eval callback captures its hidden
// state h_p at every position: for deepseek4 the output of its last layer ("l_last-<L-1>",
// [hc*n_embd] floats), for glm-dsa the output-normed state the MTP head reads (llama.cpp's
// t_h_nextn, [n_embd]; the node is named "h_nextn", then renamed "result_norm"). Then an
// LLAMA_CONTEXT_TYPE_MTP context runs the rows (x_p, h_{p-1}) at position p, h_{-1} = 0, in
// chunks of --chunk (default 32), and --out gets their logits [n_tokens][n_vocab] (row p
// predicts x_{p+1}); --dump-hidden FILE also writes the trunk's h rows [n_tokens][width].
//
// --tokenize STRINGS: instead, loads only the vocabulary and writes llama.cpp's token ids for
// each string of STRINGS (little-endian u32 byte length + bytes, repeated) to --out, one line
// of space-separated ids per string (no BOS; control tokens parsed only with --parse-special).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "capture.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

namespace {

struct Options {
    std::string model;
    std::string token_ids;
    std::string out;
    std::string mode = "prefill";
    int chunk = 0;
    int threads = 2;
    int n_ctx = 0;
    std::string dump_experts;
    std::string dump_indexer;
    std::string dump_hidden;  // --mode mtp: the trunk's hidden rows
    std::string backend_dir = DS4_ORACLE_BIN;
    bool verbose = false;
    std::string tokenize;  // --tokenize STRINGS: tokenizer mode
    bool parse_special = false;
};

[[noreturn]] void fail(const std::string& msg) { throw std::runtime_error(msg); }

std::vector<llama_token> read_token_ids(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail(fmt::format("{}: cannot open token-id file", path));
    std::vector<llama_token> ids;
    std::string word;
    while (in >> word) {
        size_t used = 0;
        long long v = 0;
        try {
            v = std::stoll(word, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != word.size() || v < 0 || v > INT32_MAX) {
            fail(fmt::format("{}: token {} is '{}', expected a non-negative integer", path, ids.size(), word));
        }
        ids.push_back(static_cast<llama_token>(v));
    }
    if (ids.empty()) fail(fmt::format("{}: no token ids", path));
    return ids;
}

// llama.cpp's log: errors always go to stderr, everything with --verbose.
struct LogState {
    bool verbose = false;
    ggml_log_level last = GGML_LOG_LEVEL_NONE;
};
LogState g_log;

void log_callback(ggml_log_level level, const char* text, void*) {
    if (level != GGML_LOG_LEVEL_CONT) g_log.last = level;
    if (g_log.verbose || g_log.last == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

// Batch size per llama_decode for each mode; every call is one ubatch (n_ubatch = n_batch).
int batch_size(const Options& o, int n_tokens) {
    if (o.mode == "prefill") return n_tokens;
    if (o.mode == "decode") return 1;
    if (o.mode == "mtp") return std::min(o.chunk > 0 ? o.chunk : 32, n_tokens);  // the MTP context's
    if (o.mode == "chunked") {
        if (o.chunk <= 0) fail("--mode chunked needs --chunk N with N > 0");
        return std::min(o.chunk, n_tokens);
    }
    fail(fmt::format("unknown --mode '{}' (prefill, decode, chunked or mtp)", o.mode));
}

void write_f32(const std::string& path, const std::vector<float>& v) {
    static_assert(std::endian::native == std::endian::little, "logits files are little-endian");
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
    if (!f) fail(fmt::format("{}: cannot open for writing", path));
    if (std::fwrite(v.data(), sizeof(float), v.size(), f.get()) != v.size()) {
        fail(fmt::format("{}: write failed", path));
    }
}

using ModelPtr = std::unique_ptr<llama_model, void (*)(llama_model*)>;

// general.architecture of a loaded model.
std::string architecture(const llama_model* model) {
    char buf[64] = {};
    if (llama_model_meta_val_str(model, "general.architecture", buf, sizeof buf) < 0) return {};
    return buf;
}
using ContextPtr = std::unique_ptr<llama_context, void (*)(llama_context*)>;

// Loads the model with the exact settings of spec/ORACLE.md and checks the token ids.
ModelPtr load_model(const Options& o, const std::vector<llama_token>& tokens, bool load_mtp) {
    g_log.verbose = o.verbose;
    llama_log_set(log_callback, nullptr);
    ggml_log_set(log_callback, nullptr);
    // The CPU backend is a separate library per x86 level; this picks the best for this CPU.
    ggml_backend_load_all_from_path(o.backend_dir.c_str());
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.load_mode = LLAMA_LOAD_MODE_MMAP;
    mp.use_extra_bufts = false;  // no weight repacking: it changes numerics (spec/ORACLE.md)
    mp.load_mtp = load_mtp;
    ModelPtr model(llama_model_load_from_file(o.model.c_str(), mp), &llama_model_free);
    if (!model) fail(fmt::format("{}: llama.cpp could not load the model (--verbose shows its log)", o.model));

    if (const std::string arch = architecture(model.get()); arch != "deepseek4" && arch != "glm-dsa")
        fail(fmt::format("{}: architecture '{}'; the harness runs deepseek4 and glm-dsa", o.model, arch));
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model.get()));
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i] >= n_vocab) {
            fail(fmt::format("{}: token {} is {}, outside the vocabulary of {}", o.token_ids, i, tokens[i], n_vocab));
        }
    }
    return model;
}

// Context settings of spec/ORACLE.md for batches of `bs` tokens (one ubatch each).
llama_context_params context_params(const Options& o, int n_tokens, int bs) {
    llama_context_params cp = llama_context_default_params();
    // The same n_ctx for every mode, so the caches have the same sizes whatever the batching.
    cp.n_ctx = o.n_ctx > 0 ? static_cast<uint32_t>(o.n_ctx) : static_cast<uint32_t>((n_tokens + 255) / 256 * 256);
    cp.n_batch = static_cast<uint32_t>(bs);
    cp.n_ubatch = static_cast<uint32_t>(bs);
    cp.n_seq_max = 1;
    cp.n_threads = o.threads;
    cp.n_threads_batch = o.threads;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;  // exact settings of spec/ORACLE.md
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.no_perf = true;
    return cp;
}

ContextPtr new_context(const Options& o, llama_model* model, const llama_context_params& cp, int n_tokens) {
    ContextPtr ctx(llama_init_from_model(model, cp), &llama_free);
    if (!ctx) fail(fmt::format("{}: llama.cpp could not create a context (n_ctx {})", o.model, cp.n_ctx));
    if (llama_n_ctx(ctx.get()) < static_cast<uint32_t>(n_tokens)) {
        fail(fmt::format("context of {} is smaller than the {} tokens (--n-ctx)", llama_n_ctx(ctx.get()), n_tokens));
    }
    return ctx;
}

int run(const Options& o) {
    const std::vector<llama_token> tokens = read_token_ids(o.token_ids);
    const int n_tokens = static_cast<int>(tokens.size());
    const int bs = batch_size(o, n_tokens);
    ModelPtr model = load_model(o, tokens, false);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model.get()));
    // The indexer capture reads each architecture's own node names (capture.h).
    const bool capture = !o.dump_experts.empty() || !o.dump_indexer.empty();
    ds4::oracle::RouteCapture routes(!o.dump_experts.empty(), !o.dump_indexer.empty(),
                                     architecture(model.get()) == "glm-dsa");

    llama_context_params cp = context_params(o, n_tokens, bs);
    if (capture) {
        cp.cb_eval = &ds4::oracle::RouteCapture::eval_callback;
        cp.cb_eval_user_data = &routes;
    }
    ContextPtr ctx = new_context(o, model.get(), cp, n_tokens);

    std::vector<float> logits(static_cast<size_t>(n_tokens) * n_vocab);
    llama_batch batch = llama_batch_init(bs, 0, 1);
    std::unique_ptr<llama_batch, void (*)(llama_batch*)> batch_guard(&batch, [](llama_batch* b) { llama_batch_free(*b); });

    const auto t0 = std::chrono::steady_clock::now();
    for (int start = 0; start < n_tokens; start += bs) {
        const int n = std::min(bs, n_tokens - start);
        batch.n_tokens = n;
        for (int i = 0; i < n; ++i) {
            batch.token[i] = tokens[start + i];
            batch.pos[i] = start + i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = 1;
        }
        routes.begin_batch(start, n);
        const int rc = llama_decode(ctx.get(), batch);
        if (!routes.error().empty()) fail("capture: " + routes.error());
        if (rc != 0) fail(fmt::format("llama_decode failed with {} at position {}", rc, start));
        for (int i = 0; i < n; ++i) {
            const float* row = llama_get_logits_ith(ctx.get(), i);
            if (row == nullptr) fail(fmt::format("no logits for position {}", start + i));
            std::copy(row, row + n_vocab, logits.begin() + static_cast<size_t>(start + i) * n_vocab);
        }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    write_f32(o.out, logits);
    if (!o.dump_experts.empty()) routes.write_experts(o.dump_experts);
    if (!o.dump_indexer.empty()) routes.write_indexer(o.dump_indexer);
    std::fprintf(stderr, "ds4-oracle: %d tokens, n_vocab %d, %s (batch %d), %d threads, %.3f s (%.1f tok/s)\n",
                 n_tokens, n_vocab, o.mode.c_str(), bs, o.threads, secs, n_tokens / secs);
    return 0;
}

using BatchPtr = std::unique_ptr<llama_batch, void (*)(llama_batch*)>;
BatchPtr batch_guard(llama_batch* b) {
    return BatchPtr(b, [](llama_batch* x) { llama_batch_free(*x); });
}

// The trunk's hidden state for the MTP head (the header comment), read by the eval callback
// while the graph runs. llama_get_embeddings_nextn (unmasked) is not used: its tensor
// is a view whose buffer the scheduler reuses for later nodes, so some or all of its rows are
// overwritten by the time they are copied out (seen with this build: rows 16 and 256 of 320
// with one output row, every row with all rows as outputs).
struct HiddenCapture {
    std::string name;
    size_t width = 0;
    std::vector<float> rows;
    int times = 0;
    std::string error;

    static bool callback(ggml_tensor* t, bool ask, void* user_data) {
        auto* c = static_cast<HiddenCapture*>(user_data);
        if (c->name != ggml_get_name(t)) return !ask;
        if (ask) return true;
        if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t) ||
            static_cast<size_t>(ggml_nelements(t)) != c->rows.size()) {
            c->error = fmt::format("{}: type {}, {} values, expected {} contiguous f32", c->name,
                                   ggml_type_name(t->type), ggml_nelements(t), c->rows.size());
            return false;
        }
        ggml_backend_tensor_get(t, c->rows.data(), 0, ggml_nbytes(t));
        ++c->times;
        return true;
    }
};

// The trunk over all tokens in one batch: its final hidden states [n_tokens][n_embd_out].
// glm-dsa's state comes after llama.cpp drops the rows that give no logits, so there every row
// gives logits.
std::vector<float> trunk_hidden(const Options& o, llama_model* model, const std::vector<llama_token>& tokens) {
    const int n_tokens = static_cast<int>(tokens.size());
    const bool glm = architecture(model) == "glm-dsa";
    HiddenCapture cap;
    cap.name = glm ? std::string("result_norm") : fmt::format("l_last-{}", llama_model_n_layer(model) - 1);
    cap.width = static_cast<size_t>(llama_model_n_embd_out(model));
    cap.rows.assign(static_cast<size_t>(n_tokens) * cap.width, 0.0f);
    llama_context_params cp = context_params(o, n_tokens, n_tokens);
    cp.cb_eval = &HiddenCapture::callback;
    cp.cb_eval_user_data = &cap;
    ContextPtr ctx = new_context(o, model, cp, n_tokens);
    llama_batch batch = llama_batch_init(n_tokens, 0, 1);
    BatchPtr guard = batch_guard(&batch);
    batch.n_tokens = n_tokens;
    for (int i = 0; i < n_tokens; ++i) {
        batch.token[i] = tokens[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = glm || i == n_tokens - 1;
    }
    const int rc = llama_decode(ctx.get(), batch);
    if (!cap.error.empty()) fail("hidden capture: " + cap.error);
    if (rc != 0) fail(fmt::format("trunk llama_decode failed with {}", rc));
    if (cap.times != 1) fail(fmt::format("hidden capture: {} seen {} times, expected once", cap.name, cap.times));
    return cap.rows;
}

int run_mtp(const Options& o) {
    const std::vector<llama_token> tokens = read_token_ids(o.token_ids);
    const int n_tokens = static_cast<int>(tokens.size());
    const int bs = batch_size(o, n_tokens);
    ModelPtr model = load_model(o, tokens, true);
    if (llama_model_n_layer_nextn(model.get()) < 1) fail(fmt::format("{}: the model has no MTP block", o.model));
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model.get()));
    const size_t width = static_cast<size_t>(llama_model_n_embd_out(model.get()));

    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<float> h = trunk_hidden(o, model.get(), tokens);

    llama_context_params cp = context_params(o, n_tokens, bs);
    cp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
    ContextPtr ctx = new_context(o, model.get(), cp, n_tokens);
    llama_batch batch = llama_batch_init(bs, static_cast<int32_t>(width), 1);
    BatchPtr guard = batch_guard(&batch);
    // llama_batch_init gives embd or token; an MTP batch has both (llama_batch_free frees it).
    batch.token = static_cast<llama_token*>(std::malloc(sizeof(llama_token) * static_cast<size_t>(bs)));
    if (batch.token == nullptr) throw std::bad_alloc();

    std::vector<float> logits(static_cast<size_t>(n_tokens) * n_vocab);
    for (int start = 0; start < n_tokens; start += bs) {
        const int n = std::min(bs, n_tokens - start);
        batch.n_tokens = n;
        for (int i = 0; i < n; ++i) {
            const int p = start + i;
            batch.token[i] = tokens[p];
            float* row = batch.embd + static_cast<size_t>(i) * width;
            if (p == 0)
                std::fill(row, row + width, 0.0f);  // h_{-1} = 0
            else
                std::copy_n(h.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(p - 1) * width), width, row);
            batch.pos[i] = p;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = 1;
        }
        if (const int rc = llama_decode(ctx.get(), batch); rc != 0)
            fail(fmt::format("MTP llama_decode failed with {} at position {}", rc, start));
        for (int i = 0; i < n; ++i) {
            const float* row = llama_get_logits_ith(ctx.get(), i);
            if (row == nullptr) fail(fmt::format("no MTP logits for position {}", start + i));
            std::copy(row, row + n_vocab, logits.begin() + static_cast<size_t>(start + i) * n_vocab);
        }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    write_f32(o.out, logits);
    if (!o.dump_hidden.empty()) write_f32(o.dump_hidden, h);
    std::fprintf(stderr, "ds4-oracle: MTP over %d tokens, n_vocab %d, hidden %zu, chunk %d, %d threads, %.3f s\n",
                 n_tokens, n_vocab, width, bs, o.threads, secs);
    return 0;
}

// Strings file of --tokenize: [u32 little-endian byte length][bytes], repeated.
std::vector<std::string> read_strings(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(fmt::format("{}: cannot open strings file", path));
    std::vector<std::string> out;
    unsigned char len_bytes[4];
    while (in.read(reinterpret_cast<char*>(len_bytes), 4)) {
        const uint32_t n = uint32_t(len_bytes[0]) | uint32_t(len_bytes[1]) << 8 |
                           uint32_t(len_bytes[2]) << 16 | uint32_t(len_bytes[3]) << 24;
        std::string s(n, '\0');
        if (!in.read(s.data(), std::streamsize(n)))
            fail(fmt::format("{}: string {} is truncated", path, out.size()));
        out.push_back(std::move(s));
    }
    if (in.gcount() != 0) fail(fmt::format("{}: trailing bytes after string {}", path, out.size()));
    return out;
}

int run_tokenize(const Options& o) {
    const std::vector<std::string> strings = read_strings(o.tokenize);
    g_log.verbose = o.verbose;
    llama_log_set(log_callback, nullptr);
    ggml_log_set(log_callback, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    std::unique_ptr<llama_model, void (*)(llama_model*)> model(
        llama_model_load_from_file(o.model.c_str(), mp), &llama_model_free);
    if (!model) fail(fmt::format("{}: llama.cpp could not load the vocabulary (--verbose shows its log)", o.model));
    const llama_vocab* vocab = llama_model_get_vocab(model.get());

    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(o.out.c_str(), "wb"), &std::fclose);
    if (!f) fail(fmt::format("{}: cannot open for writing", o.out));
    std::vector<llama_token> ids;
    for (size_t k = 0; k < strings.size(); ++k) {
        const std::string& s = strings[k];
        ids.resize(s.size() + 16);
        int n = llama_tokenize(vocab, s.data(), int32_t(s.size()), ids.data(), int32_t(ids.size()),
                               /*add_special=*/false, o.parse_special);
        if (n < 0 && n != INT32_MIN) {
            ids.resize(size_t(-n));
            n = llama_tokenize(vocab, s.data(), int32_t(s.size()), ids.data(), int32_t(ids.size()),
                               false, o.parse_special);
        }
        if (n < 0) fail(fmt::format("llama_tokenize failed ({}) on string {}", n, k));
        std::string line;
        for (int i = 0; i < n; ++i) {
            if (i) line += ' ';
            line += std::to_string(ids[size_t(i)]);
        }
        line += '\n';
        if (std::fwrite(line.data(), 1, line.size(), f.get()) != line.size())
            fail(fmt::format("{}: write failed", o.out));
    }
    std::fprintf(stderr, "ds4-oracle: tokenized %zu strings\n", strings.size());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"Runs a deepseek4 or glm-dsa GGUF through the llama.cpp oracle and writes float32 logits "
                 "[n_tokens][n_vocab] (F32 KV, flash attention off, no repack)."};
    app.add_option("-m,--model", o.model, "GGUF model")->required();
    app.add_option("--token-ids", o.token_ids, "text file of whitespace-separated token ids");
    app.add_option("--out", o.out, "output logits file (raw little-endian float32); with --tokenize, the ids")->required();
    app.add_option("--tokenize", o.tokenize, "tokenizer mode: strings file (u32 LE length + bytes, repeated)");
    app.add_flag("--parse-special", o.parse_special, "with --tokenize: match control tokens in the text");
    app.add_option("--mode", o.mode,
                   "prefill (one batch), decode (one token per call), chunked (--chunk), mtp (the MTP head's "
                   "logits, rows of --chunk, default 32)")
        ->check(CLI::IsMember({"prefill", "decode", "chunked", "mtp"}));
    app.add_option("--chunk", o.chunk, "tokens per llama_decode in chunked and mtp modes");
    app.add_option("--dump-hidden", o.dump_hidden, "mtp mode: write the trunk's hidden rows [n_tokens][width] f32");
    app.add_option("--threads", o.threads, "CPU threads")->check(CLI::PositiveNumber);
    app.add_option("--n-ctx", o.n_ctx, "context size (default: token count rounded up to 256)");
    app.add_option("--dump-experts", o.dump_experts, "write chosen experts: 'layer pos id...' per line");
    app.add_option("--dump-indexer", o.dump_indexer,
                   "write indexer-selected rows: 'layer pos id...' per line");
    app.add_option("--backend-dir", o.backend_dir, "folder of the ggml CPU backend libraries");
    app.add_flag("-v,--verbose", o.verbose, "show llama.cpp's log");
    CLI11_PARSE(app, argc, argv);
    try {
        if (!o.tokenize.empty()) return run_tokenize(o);
        if (o.token_ids.empty()) fail("--token-ids is required (or --tokenize)");
        if (o.mode == "mtp") {
            if (!o.dump_experts.empty() || !o.dump_indexer.empty()) fail("--mode mtp has no --dump-experts/--dump-indexer");
            return run_mtp(o);
        }
        if (!o.dump_hidden.empty()) fail("--dump-hidden needs --mode mtp");
        return run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ds4-oracle: error: %s\n", e.what());
        return 1;
    }
}
