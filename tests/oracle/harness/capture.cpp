#include "capture.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "ggml-backend.h"
#include "ggml.h"

namespace ds4::oracle {
namespace {

constexpr const char* kExperts = "ffn_moe_topk";
constexpr const char* kIndexerPicks = "lid_top_k";
constexpr const char* kIndexerScores = "lid_score_masked";
constexpr const char* kGlmPicks = "top_k";
constexpr const char* kGlmScores = "indexer_score";

// Splits "<base>-<layer>" into base and layer; false if the name has no numeric suffix.
bool split_name(const char* name, std::string& base, int& layer) {
    const char* dash = std::strrchr(name, '-');
    if (dash == nullptr || dash[1] == '\0') return false;
    char* end = nullptr;
    const long v = std::strtol(dash + 1, &end, 10);
    if (*end != '\0' || v < 0) return false;
    base.assign(name, dash);
    layer = static_cast<int>(v);
    return true;
}

// A 2-D view of a captured tensor: element (i0, i1) of a node that may be a strided view
// (ffn_moe_topk is a view of the argsort result), copied out of its backend buffer.
class Matrix {
public:
    explicit Matrix(const ggml_tensor* t) : t_(t), bytes_(ggml_nbytes(t)) {
        if (t->ne[2] != 1 || t->ne[3] != 1) {
            throw std::runtime_error(fmt::format("{}: expected a 2-D tensor, got ne=[{}, {}, {}, {}]",
                                                 t->name, t->ne[0], t->ne[1], t->ne[2], t->ne[3]));
        }
        ggml_backend_tensor_get(t, bytes_.data(), 0, bytes_.size());
    }
    int64_t cols() const { return t_->ne[0]; }
    int64_t rows() const { return t_->ne[1]; }
    template <class T>
    T at(int64_t i0, int64_t i1) const {
        T v;
        std::memcpy(&v, bytes_.data() + i0 * t_->nb[0] + i1 * t_->nb[1], sizeof v);
        return v;
    }

private:
    const ggml_tensor* t_;
    std::vector<uint8_t> bytes_;  // ggml_nbytes(t): the whole strided span
};

void write_lines(const std::string& path,
                 const std::map<std::pair<int, int64_t>, std::vector<int32_t>>& lines) {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "w"), &std::fclose);
    if (!f) throw std::runtime_error(fmt::format("{}: cannot open for writing", path));
    for (const auto& [key, ids] : lines) {
        std::string line = fmt::format("{} {}", key.first, key.second);
        for (int32_t id : ids) line += fmt::format(" {}", id);
        line += '\n';
        if (std::fputs(line.c_str(), f.get()) < 0) {
            throw std::runtime_error(fmt::format("{}: write failed", path));
        }
    }
}

}  // namespace

void RouteCapture::begin_batch(int64_t first_pos, int64_t n_tokens) {
    first_pos_ = first_pos;
    n_tokens_ = n_tokens;
}

bool RouteCapture::wants(const ggml_tensor* t) const {
    std::string base;
    int layer = 0;
    if (!split_name(t->name, base, layer)) return false;
    if (experts_ && base == kExperts) return true;
    if (!indexer_) return false;
    if (glm_) return base == kGlmPicks || (base == kGlmScores && t->ne[2] == 1 && t->ne[3] == 1);
    return base == kIndexerPicks || base == kIndexerScores;
}

bool RouteCapture::eval_callback(ggml_tensor* t, bool ask, void* user_data) {
    auto* self = static_cast<RouteCapture*>(user_data);
    if (ask) return self->wants(t);
    try {
        return self->observe(t);
    } catch (const std::exception& e) {
        self->error_ = e.what();
        return false;  // cancels the graph compute; llama_decode then fails
    }
}

bool RouteCapture::observe(const ggml_tensor* t) {
    std::string base;
    int layer = 0;
    split_name(t->name, base, layer);
    if (glm_ && base == kGlmScores) last_score_layer_ = layer;
    if (glm_ && base == kGlmPicks) {
        // Shared layers renamed the full layer's picks (capture.h): file them under the layer
        // whose scores came last.
        if (last_score_layer_ < 0) throw std::runtime_error(fmt::format("{}: picks before any indexer_score", t->name));
        layer = last_score_layer_;
    }
    const Matrix m(t);
    if (m.rows() != n_tokens_) {
        throw std::runtime_error(fmt::format("{}: {} token columns, the batch has {} (n_ubatch too small?)",
                                             t->name, m.rows(), n_tokens_));
    }
    if (base == kIndexerScores || base == kGlmScores) {
        if (t->type != GGML_TYPE_F32) {
            throw std::runtime_error(fmt::format("{}: type {}, expected f32", t->name, ggml_type_name(t->type)));
        }
        auto& rows = pending_scores_[layer];
        rows.assign(m.rows(), {});
        for (int64_t i = 0; i < m.rows(); ++i) {
            rows[i].resize(m.cols());
            for (int64_t j = 0; j < m.cols(); ++j) rows[i][j] = m.at<float>(j, i);
        }
    } else {
        if (t->type != GGML_TYPE_I32) {
            throw std::runtime_error(fmt::format("{}: type {}, expected i32", t->name, ggml_type_name(t->type)));
        }
        std::vector<std::vector<int32_t>> ids(m.rows(), std::vector<int32_t>(m.cols()));
        for (int64_t i = 0; i < m.rows(); ++i) {
            for (int64_t j = 0; j < m.cols(); ++j) ids[i][j] = m.at<int32_t>(j, i);
        }
        if (base == kExperts) {
            for (int64_t i = 0; i < m.rows(); ++i) experts_by_pos_[{layer, first_pos_ + i}] = std::move(ids[i]);
            return true;
        }
        pending_picks_[layer] = std::move(ids);
    }
    if (pending_scores_.count(layer) && pending_picks_.count(layer)) take_indexer_picks(layer);
    return true;
}

void RouteCapture::take_indexer_picks(int layer) {
    const auto& scores = pending_scores_.at(layer);
    const auto& picks = pending_picks_.at(layer);
    for (size_t i = 0; i < picks.size(); ++i) {
        std::vector<int32_t> visible;
        for (int32_t id : picks[i]) {
            if (id < 0 || static_cast<size_t>(id) >= scores[i].size()) {
                throw std::runtime_error(fmt::format("{}-{}: id {} outside the {} scored slots",
                                                     glm_ ? kGlmPicks : kIndexerPicks, layer, id, scores[i].size()));
            }
            // Masked slots score -inf; top-k picks them only when fewer rows are visible.
            if (std::isfinite(scores[i][id])) visible.push_back(id);
        }
        std::sort(visible.begin(), visible.end());
        indexer_by_pos_[{layer, first_pos_ + static_cast<int64_t>(i)}] = std::move(visible);
    }
    pending_scores_.erase(layer);
    pending_picks_.erase(layer);
}

void RouteCapture::write_experts(const std::string& path) const { write_lines(path, experts_by_pos_); }
void RouteCapture::write_indexer(const std::string& path) const { write_lines(path, indexer_by_pos_); }

}  // namespace ds4::oracle
