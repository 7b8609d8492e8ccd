#include "quantize/requantize.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

#include "common/error.h"
#include "common/thread_pool.h"
#include "gguf/writer.h"
#include "quant/quant.h"
#include "quantize/ggml_quantize.h"

namespace ds4::quantize {
namespace {

std::string human(uint64_t bytes) {
    if (bytes >= (uint64_t(1) << 30)) return fmt::format("{:.2f} GiB", double(bytes) / double(1ull << 30));
    return fmt::format("{:.2f} MiB", double(bytes) / double(1ull << 20));
}

uint64_t out_bytes(const gguf::TensorInfo& t, TensorType type) {
    return uint64_t(row_bytes(type, t.ne[0])) * uint64_t(t.n_elements() / t.ne[0]);
}

// Drops a tensor's pages from the template's mapping once it has been read: a mapping keeps
// every page it touched resident (and counted), which over a whole model is the model's size.
void release_pages(const gguf::File& f, const gguf::TensorInfo& t) {
    const long page = sysconf(_SC_PAGESIZE);
    const auto begin = reinterpret_cast<uintptr_t>(f.data(t));
    const uintptr_t lo = (begin + uintptr_t(page) - 1) & ~uintptr_t(page - 1);
    const uintptr_t hi = (begin + t.n_bytes) & ~uintptr_t(page - 1);
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

class Progress {
public:
    Progress(std::FILE* log, bool bar, uint64_t total) : log_(log), bar_(bar), total_(std::max<uint64_t>(total, 1)) {}
    void step(const std::string& name, uint64_t bytes) {
        done_ += bytes;
        if (!log_) return;
        const double s = std::chrono::duration<double>(clock::now() - t0_).count();
        const double frac = double(done_) / double(total_);
        const double eta = frac > 0 ? s / frac - s : 0;
        const int pct = int(frac * 100);
        if (bar_) {
            const int fill = int(frac * 30);
            std::fprintf(log_, "\r[%s%s] %3d%%  %s / %s  %.0f s, ETA %.0f s  %-40.40s", std::string(size_t(fill), '#').c_str(),
                         std::string(size_t(30 - fill), '.').c_str(), pct, human(done_).c_str(), human(total_).c_str(), s,
                         eta, name.c_str());
            if (done_ >= total_) std::fputc('\n', log_);
        } else if (pct / 10 != last_ / 10 || done_ >= total_) {
            std::fprintf(log_, "  %3d%%  %s / %s  %.1f s, ETA %.1f s  (%s)\n", pct, human(done_).c_str(),
                         human(total_).c_str(), s, eta, name.c_str());
            last_ = pct;
        }
        std::fflush(log_);
    }

private:
    using clock = std::chrono::steady_clock;
    std::FILE* log_;
    bool bar_;
    uint64_t total_, done_ = 0;
    int last_ = -1;
    clock::time_point t0_ = clock::now();
};

// fn(i) for i in [0, n) on the pool (this thread without one); the first exception of any
// task is rethrown here once all have finished.
void parallel(ThreadPool* pool, int64_t n, const std::function<void(int64_t)>& fn) {
    std::mutex mu;
    std::exception_ptr first;
    auto run = [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            try {
                fn(i);
            } catch (...) {
                std::lock_guard<std::mutex> lock(mu);
                if (!first) first = std::current_exception();
            }
        }
    };
    if (pool && n > 1) pool->parallel_for(n, run, 1);
    else run(0, n);
    if (first) std::rethrow_exception(first);
}

// llama.cpp's llama_ftype of a dominant type (the mapping llama.cpp's loader guesses with;
// MXFP4 experts are llama-quantize's MOSTLY_MXFP4_MOE). nullopt: no ftype names it.
std::optional<uint32_t> ftype_of(TensorType t) {
    switch (t) {
        case TensorType::F32: return 0;
        case TensorType::F16: return 1;
        case TensorType::Q4_0: return 2;
        case TensorType::Q4_1: return 3;
        case TensorType::Q8_0: return 7;
        case TensorType::Q5_0: return 8;
        case TensorType::Q5_1: return 9;
        case TensorType::Q2_K: return 10;
        case TensorType::Q3_K: return 12;   // MOSTLY_Q3_K_M
        case TensorType::Q4_K: return 15;   // MOSTLY_Q4_K_M
        case TensorType::Q5_K: return 17;   // MOSTLY_Q5_K_M
        case TensorType::Q6_K: return 18;
        case TensorType::IQ2_XXS: return 19;
        case TensorType::IQ2_XS: return 20;
        case TensorType::IQ3_XXS: return 23;
        case TensorType::IQ1_S: return 24;
        case TensorType::IQ4_NL: return 25;
        case TensorType::IQ3_S: return 26;
        case TensorType::IQ2_S: return 28;
        case TensorType::IQ4_XS: return 30;
        case TensorType::IQ1_M: return 31;
        case TensorType::BF16: return 32;
        case TensorType::TQ1_0: return 36;
        case TensorType::TQ2_0: return 37;
        case TensorType::MXFP4: return 38;  // MOSTLY_MXFP4_MOE
        default: return std::nullopt;
    }
}

}  // namespace

uint32_t file_type(const Plan& plan) {
    std::map<TensorType, uint64_t> bytes;
    for (const auto& it : plan.items)
        if (it.info->n_dims >= 2 && ftype_of(it.type)) bytes[it.type] += it.bytes;
    TensorType top = TensorType::F32;
    uint64_t most = 0;
    for (const auto& [t, b] : bytes)
        if (b > most) most = b, top = t;
    return *ftype_of(top);
}

uint64_t fnv1a64(std::span<const uint8_t> bytes) {
    uint64_t h = 1469598103934665603ull;
    for (uint8_t b : bytes) h = (h ^ b) * 1099511628211ull;
    return h;
}

Plan make_plan(const gguf::File& tmpl, const Recipe& recipe) {
    Plan p;
    for (const auto& t : tmpl.tensors()) {
        PlanItem it{&t, family_of(t.name, t.n_dims, t.type), choose_type(recipe, t.name, t.n_dims, t.type), 0};
        const auto info = tensor_type_info(it.type);
        if (it.type != t.type && t.ne[0] % int64_t(info->block_values) != 0)
            fail("tensor {} {}: rows of {} values cannot be stored as {} (blocks of {})", t.name, t.shape_string(),
                 t.ne[0], tensor_type_name(it.type), info->block_values);
        it.bytes = it.type == t.type ? t.n_bytes : out_bytes(t, it.type);
        p.in_bytes += t.n_bytes;
        p.out_bytes += it.bytes;
        p.max_out_bytes = std::max(p.max_out_bytes, it.bytes);
        p.items.push_back(it);
    }
    return p;
}

std::string describe(const Plan& plan) {
    struct Row {
        int tensors = 0;
        uint64_t in = 0, out = 0;
        std::map<std::string, int> types;
    };
    std::map<int, Row> rows;
    int changed = 0;
    for (const auto& it : plan.items) {
        Row& r = rows[int(it.family)];
        ++r.tensors;
        r.in += it.info->n_bytes;
        r.out += it.bytes;
        ++r.types[tensor_type_name(it.info->type) + "->" + tensor_type_name(it.type)];
        changed += it.type != it.info->type;
    }
    std::string s = fmt::format("{:<15} {:>7} {:>12} {:>12}  types\n", "family", "tensors", "input", "output");
    for (const auto& [f, r] : rows) {
        std::string types;
        for (const auto& [t, n] : r.types) types += fmt::format("{}{} x{}", types.empty() ? "" : ", ", t, n);
        s += fmt::format("{:<15} {:>7} {:>12} {:>12}  {}\n", family_name(Family(f)), r.tensors, human(r.in),
                         human(r.out), types);
    }
    s += fmt::format("{:<15} {:>7} {:>12} {:>12}  {} tensors retyped; largest output tensor {}\n", "total",
                     plan.items.size(), human(plan.in_bytes), human(plan.out_bytes), changed, human(plan.max_out_bytes));
    return s;
}

RowSource gguf_rows(const gguf::File& f) {
    return [&f](const gguf::TensorInfo& t, int64_t row0, int64_t n, float* out) {
        const size_t rb = row_bytes(t.type, t.ne[0]);
        const uint8_t* src = f.data(t) + size_t(row0) * rb;
        if (t.type == TensorType::F32) {
            std::memcpy(out, src, size_t(n * t.ne[0]) * sizeof(float));
            return;
        }
        if (!quant::is_weight_format(t.type))
            fail("tensor {}: type {} cannot be converted", t.name, tensor_type_name(t.type));
        for (int64_t r = 0; r < n; ++r) quant::dequantize_row(t.type, src + size_t(r) * rb, out + r * t.ne[0], t.ne[0]);
    };
}

void Producer::produce(const PlanItem& item, std::span<uint8_t> out) const {
    const gguf::TensorInfo& t = *item.info;
    if (out.size() != item.bytes) fail("quantize: buffer of {} bytes for {} ({} bytes)", out.size(), t.name, item.bytes);
    if (source_is_tmpl && item.type == t.type) {
        std::memcpy(out.data(), tmpl.data(t), out.size());
        return;
    }
    if (raw && raw(item, out)) return;
    const int64_t n = t.ne[0], all_rows = t.n_elements() / n, per_matrix = t.ne[1];
    const int64_t matrices = all_rows / per_matrix;
    const size_t rb = row_bytes(item.type, n);
    // Chunks of rows of one matrix (~256 Ki values), so one importance vector serves a chunk.
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(per_matrix, (int64_t(1) << 18) / n));
    const int64_t chunks_per_matrix = (per_matrix + chunk - 1) / chunk;
    // IQ2_XXS without an imatrix entry: ggml cannot quantize it, so upstream's weights stand in,
    // per matrix (expert) the sum over its rows of each column's square, in row order.
    std::vector<float> synthetic;
    const bool need_synthetic = item.type == TensorType::IQ2_XXS && !(imatrix && imatrix->weights(t.name, n, matrices, 0));
    if (need_synthetic) {
        synthetic.assign(size_t(matrices * n), 0.0f);
        parallel(pool, matrices, [&](int64_t m) {
            std::vector<float> buf(size_t(chunk * n));
            float* syn = synthetic.data() + m * n;
            for (int64_t r0 = m * per_matrix; r0 < (m + 1) * per_matrix; r0 += chunk) {
                const int64_t nr = std::min(chunk, (m + 1) * per_matrix - r0);
                rows(t, r0, nr, buf.data());
                for (int64_t r = 0; r < nr; ++r)
                    for (int64_t c = 0; c < n; ++c) syn[c] += buf[size_t(r * n + c)] * buf[size_t(r * n + c)];
            }
        });
    }
    parallel(pool, matrices * chunks_per_matrix, [&](int64_t c) {
        thread_local std::vector<float> buf;
        buf.resize(size_t(chunk * n));
        const int64_t m = c / chunks_per_matrix;
        const int64_t r0 = m * per_matrix + (c % chunks_per_matrix) * chunk;
        const int64_t nr = std::min(chunk, (m + 1) * per_matrix - r0);
        rows(t, r0, nr, buf.data());
        const float* imp = need_synthetic ? synthetic.data() + m * n
                                          : imatrix ? imatrix->weights(t.name, n, matrices, m) : nullptr;
        quantize_rows(item.type, buf.data(), out.data() + size_t(r0) * rb, nr, n, imp);
    });
}

void write_output(const Plan& plan, const Producer& p, const std::string& out_path, const WriteOptions& o) {
    gguf::Writer w(out_path, p.tmpl.alignment());
    for (const auto& [key, value] : p.tmpl.metadata()) {
        if (key == "general.alignment") continue;
        // The template's file type describes the template's mix, not this one.
        w.set(key, key == "general.file_type" ? gguf::Value::u32(file_type(plan)) : value);
    }
    if (!o.imatrix_path.empty()) w.set("quantize.imatrix.file", gguf::Value::str(o.imatrix_path));
    for (const auto& it : plan.items) {
        const auto& ne = it.info->ne;
        w.add_tensor(it.info->name, it.type, std::vector<int64_t>(ne.begin(), ne.begin() + it.info->n_dims));
    }
    w.begin_data();
    std::vector<uint8_t> buf(plan.max_out_bytes);
    Progress progress(o.log, o.progress_bar, plan.out_bytes);
    for (const auto& it : plan.items) {
        const std::span<uint8_t> out(buf.data(), it.bytes);
        p.produce(it, out);
        w.write_tensor(it.info->name, out);
        if (p.source_is_tmpl) release_pages(p.tmpl, *it.info);
        if (p.done) p.done(it);
        progress.step(it.info->name, it.bytes);
    }
    w.finish();
}

int compare_output(const Plan& plan, const Producer& p, const gguf::File& ref, const std::string& only,
                   std::FILE* out) {
    int differ = 0, compared = 0;
    std::vector<uint8_t> buf;
    for (const auto& it : plan.items) {
        if (!only.empty() && it.info->name != only) continue;
        ++compared;
        buf.resize(it.bytes);
        p.produce(it, buf);
        const gguf::TensorInfo* r = ref.find_tensor(it.info->name);
        if (!r) {
            std::fprintf(out, "tensor: %s\nbyte_compare: FAIL (not in %s)\n", it.info->name.c_str(), ref.path().c_str());
            ++differ;
            continue;
        }
        const std::span<const uint8_t> theirs(ref.data(*r), r->n_bytes);
        size_t mismatches = 0, first = SIZE_MAX;
        for (size_t i = 0; i < std::min(buf.size(), theirs.size()); ++i)
            if (buf[i] != theirs[i]) first = std::min(first, i), ++mismatches;
        if (buf.size() != theirs.size()) {
            first = std::min(first, std::min(buf.size(), theirs.size()));
            mismatches += std::max(buf.size(), theirs.size()) - std::min(buf.size(), theirs.size());
        }
        const bool same = mismatches == 0 && r->type == it.type;
        if (!only.empty() || !same) {
            std::fprintf(out, "tensor: %s\ntype: %s (reference %s)\ngenerated_bytes: %zu\nreference_bytes: %zu\n",
                         it.info->name.c_str(), tensor_type_name(it.type).c_str(), tensor_type_name(r->type).c_str(),
                         buf.size(), theirs.size());
            std::fprintf(out, "generated_fnv1a64: %016llx\nreference_fnv1a64: %016llx\n",
                         (unsigned long long)fnv1a64(buf), (unsigned long long)fnv1a64(theirs));
            if (same) std::fprintf(out, "byte_compare: OK\n");
            else std::fprintf(out, "byte_compare: FAIL mismatches=%zu first=%zu\n", mismatches, first == SIZE_MAX ? 0 : first);
        }
        differ += !same;
        if (p.source_is_tmpl) release_pages(p.tmpl, *it.info);
        if (p.done) p.done(it);
    }
    if (!only.empty() && compared == 0) fail("tensor {} is not in {}", only, p.tmpl.path());
    if (only.empty())
        std::fprintf(out, "compared %d tensors with %s: %d differ\n", compared, ref.path().c_str(), differ);
    return differ;
}

}  // namespace ds4::quantize
