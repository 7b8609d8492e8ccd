#include "model/blocks/routed_ffn.h"

#include <limits>

#include "common/error.h"
#include "quant/quant.h"

namespace ds4::blocks {
namespace {

// One call's expert products: the plan (slots per expert, the used experts), the buffers, and
// per group of experts the gate/up region, the SwiGLU rows and the down region.
class ExpertRun {
public:
    ExpertRun(const RoutedFfnSpec& spec, const float* v, int64_t n, std::span<const Route> routes,
              model::ExpertSource& source, ThreadPool& pool, ScratchArena& scratch, FfnBuffers& buf)
        : s_(spec), n_(n), K_(spec.n_used), S_(n * spec.n_used), D_(spec.n_embd), F_(spec.ff),
          FS_(spec.shared ? spec.shared->gate.rows : 0), source_(source), pool_(pool), buf_(buf) {
        plan(routes);
        bind(v, scratch);
    }

    void run(const std::function<void()>& hint) {
        const size_t group = std::max<size_t>(1, source_.capacity());
        std::vector<model::ExpertWeights> ew(static_cast<size_t>(s_.n_expert));
        for (size_t g0 = 0; g0 < used_.size(); g0 += group) {
            const size_t g1 = std::min(used_.size(), g0 + group);
            const std::span<const int32_t> in_group(used_.data() + g0, g1 - g0);
            const bool first = g0 == 0;  // the shared expert runs with the first group
            source_.prepare(s_.layer, in_group, std::span<const int32_t>(used_rows_.data() + g0, g1 - g0));
            for (int32_t e : in_group) ew[size_t(e)] = source_.expert(s_.layer, e);
            if (first && used_.size() <= group && hint && source_.wants_hints()) hint();
            gate_up(in_group, ew, first && s_.shared);
            swiglu_rows();
            down(in_group, ew, first && s_.shared);
            source_.release(s_.layer);
        }
    }

    ExpertOutputs outputs() const {
        return {yk_, s_.shared ? ysh_ : nullptr, n_, K_, D_, g_, s_.shared ? gs_ : nullptr, F_, FS_};
    }

private:
    // Slot t*K+k is row t's k-th chosen expert; each expert's slots in row order.
    void plan(std::span<const Route> routes) {
        const int64_t E = s_.n_expert;
        slots_of_.resize(size_t(E));
        for (int64_t t = 0; t < n_; ++t)
            for (int64_t k = 0; k < K_; ++k) {
                const int32_t e = routes[size_t(t)].chosen[size_t(k)];
                if (e < 0 || e >= E) fail("layer {}: row {} routed to expert {} of {}", s_.layer, t, e, E);
                slots_of_[size_t(e)].push_back(t * K_ + k);
            }
        for (int64_t e = 0; e < E; ++e)
            if (!slots_of_[size_t(e)].empty()) {
                used_.push_back(int32_t(e));
                used_rows_.push_back(int32_t(slots_of_[size_t(e)].size()));
            }
    }

    // The inputs in the dot types of the routed and the shared gate/up weights, and the
    // products' buffers.
    void bind(const float* v, ScratchArena& scratch) {
        const TensorType t_exp = quant::dot_type(s_.gate_type);
        const TensorType t_sh = s_.shared ? quant::dot_type(s_.shared->gate.type) : t_exp;
        if (quant::dot_type(s_.up_type) != t_exp || (s_.shared && quant::dot_type(s_.shared->up.type) != t_sh))
            fail("layer {}: gate and up projections take different activation types", s_.layer);
        buf_.v_exp.set(v, n_, D_, t_exp, &pool_);
        v_sh_ = &buf_.v_exp;
        if (t_sh != t_exp) {
            buf_.v_sh.set(v, n_, D_, t_sh, &pool_);
            v_sh_ = &buf_.v_sh;
        }
        g_ = scratch.take(S_ * F_);
        u_ = scratch.take(S_ * F_);
        gs_ = scratch.take(n_ * FS_);
        us_ = scratch.take(n_ * FS_);
        t_down_ = quant::dot_type(s_.down_type);
        t_down_sh_ = s_.shared ? quant::dot_type(s_.shared->down.type) : t_down_;
        buf_.m_exp.resize(S_, F_, t_down_);
        if (s_.shared) buf_.m_sh.resize(n_, FS_, t_down_sh_);
        yk_ = scratch.take(S_ * D_);
        ysh_ = scratch.take(n_ * D_);
        act_ptrs_.reserve(size_t(2 * S_ + 2 * n_));  // add_job keeps pointers into these: no regrowth
        out_ptrs_.reserve(size_t(2 * S_ + 2 * n_));
    }

    template <class ActOf, class OutOf>
    void add_job(const ops::Matrix& W, ActOf act_of, OutOf out_of, int64_t count) {
        const size_t a0 = act_ptrs_.size();
        for (int64_t i = 0; i < count; ++i) {
            act_ptrs_.push_back(act_of(i));
            out_ptrs_.push_back(out_of(i));
        }
        jobs_.push_back({W, act_ptrs_.data() + a0, out_ptrs_.data() + a0, count});
    }
    void clear_jobs() {
        jobs_.clear();
        act_ptrs_.clear();
        out_ptrs_.clear();
    }

    // Gate and up of the group's experts (and of the shared expert), one parallel region.
    void gate_up(std::span<const int32_t> in_group, const std::vector<model::ExpertWeights>& ew, bool shared) {
        clear_jobs();
        swiglu_rows_.clear();  // slots, then S + t for the shared expert's rows
        const ops::Activations& v_exp = buf_.v_exp;
        for (int32_t e : in_group) {
            const auto& sl = slots_of_[size_t(e)];
            const int64_t m = int64_t(sl.size());
            auto act_of = [&](int64_t i) { return v_exp.row(sl[size_t(i)] / K_); };
            add_job(ew[size_t(e)].gate, act_of, [&](int64_t i) { return &g_[size_t(sl[size_t(i)] * F_)]; }, m);
            add_job(ew[size_t(e)].up, act_of, [&](int64_t i) { return &u_[size_t(sl[size_t(i)] * F_)]; }, m);
            swiglu_rows_.insert(swiglu_rows_.end(), sl.begin(), sl.end());
        }
        if (shared) {
            auto act_of = [&](int64_t t) { return v_sh_->row(t); };
            add_job(s_.shared->gate, act_of, [&](int64_t t) { return &gs_[size_t(t * FS_)]; }, n_);
            add_job(s_.shared->up, act_of, [&](int64_t t) { return &us_[size_t(t * FS_)]; }, n_);
            for (int64_t t = 0; t < n_; ++t) swiglu_rows_.push_back(S_ + t);
        }
        ops::matmul_jobs(jobs_.data(), jobs_.size(), pool_);
    }

    // SwiGLU, then the inputs of the down projections in their dot type.
    void swiglu_rows() {
        pool_.parallel_for(int64_t(swiglu_rows_.size()), [&](int64_t b, int64_t e) {
            for (int64_t j = b; j < e; ++j) {
                const int64_t i = swiglu_rows_[size_t(j)];
                if (i < S_) {
                    swiglu(&g_[size_t(i * F_)], &u_[size_t(i * F_)], F_, s_.clamp);
                    quant::quantize_activation(t_down_, &g_[size_t(i * F_)], buf_.m_exp.row(i), F_);
                } else {
                    const int64_t t = i - S_;
                    swiglu(&gs_[size_t(t * FS_)], &us_[size_t(t * FS_)], FS_, s_.shared->clamp);
                    quant::quantize_activation(t_down_sh_, &gs_[size_t(t * FS_)], buf_.m_sh.row(t), FS_);
                }
            }
        });  // grain 1: a decode step's 7 rows (~50 us of expf) split over the threads
    }

    // Down projections: routed outputs per slot, shared output per row.
    void down(std::span<const int32_t> in_group, const std::vector<model::ExpertWeights>& ew, bool shared) {
        clear_jobs();
        for (int32_t e : in_group) {
            const auto& sl = slots_of_[size_t(e)];
            add_job(ew[size_t(e)].down, [&](int64_t i) { return buf_.m_exp.row(sl[size_t(i)]); },
                    [&](int64_t i) { return &yk_[size_t(sl[size_t(i)] * D_)]; }, int64_t(sl.size()));
        }
        if (shared)
            add_job(s_.shared->down, [&](int64_t t) { return buf_.m_sh.row(t); },
                    [&](int64_t t) { return &ysh_[size_t(t * D_)]; }, n_);
        ops::matmul_jobs(jobs_.data(), jobs_.size(), pool_);
    }

    const RoutedFfnSpec& s_;
    const int64_t n_, K_, S_, D_, F_, FS_;  // rows, experts per row, slots, widths
    model::ExpertSource& source_;
    ThreadPool& pool_;
    FfnBuffers& buf_;
    std::vector<std::vector<int64_t>> slots_of_;  // expert -> slots, in row order
    std::vector<int32_t> used_, used_rows_;       // the experts chosen, and by how many slots
    const ops::Activations* v_sh_ = nullptr;
    TensorType t_down_ = TensorType::F32, t_down_sh_ = TensorType::F32;
    float *g_ = nullptr, *u_ = nullptr, *gs_ = nullptr, *us_ = nullptr, *yk_ = nullptr, *ysh_ = nullptr;
    std::vector<const void*> act_ptrs_;
    std::vector<float*> out_ptrs_;
    std::vector<ops::MatmulJob> jobs_;
    std::vector<int64_t> swiglu_rows_;
};

}  // namespace

ExpertOutputs run_routed_experts(const RoutedFfnSpec& spec, const float* v, int64_t n, std::span<const Route> routes,
                                 model::ExpertSource& source, ThreadPool& pool, ScratchArena& scratch,
                                 FfnBuffers& buf, const std::function<void()>& hint) {
    ExpertRun run(spec, v, n, routes, source, pool, scratch, buf);
    run.run(hint);
    return run.outputs();
}

void log_routes(const Rows& rows, uint32_t layer, uint32_t n_layer, std::span<const Route> routes) {
    for (int64_t t = 0; t < rows.n; ++t) {
        model::DecisionLog* log = rows.decision_log(t);
        if (!log) continue;
        const size_t p = size_t(rows.pos[size_t(t)]);
        auto& per_layer = log->experts[p];
        per_layer.resize(n_layer);
        per_layer[layer] = routes[size_t(t)].chosen;
        auto& margins = log->expert_margin[p];
        margins.resize(n_layer, std::numeric_limits<float>::quiet_NaN());
        margins[layer] = routes[size_t(t)].margin;
    }
}

}  // namespace ds4::blocks
