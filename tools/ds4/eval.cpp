#include "eval.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file_io.h"
#include "frontend/startup.h"
#include "frontend/token_ids.h"
#include "model/model.h"
#include "model/session.h"

namespace ds4::cli {
namespace {

int32_t argmax(const float* v, int64_t n) { return int32_t(std::max_element(v, v + n) - v); }

}  // namespace

int run_eval_tokens(const Options& o) {
    const std::vector<int32_t> ids = frontend::read_token_ids(o.token_ids);
    const frontend::Started started = frontend::start_model(o);
    const int64_t V = started.model->info().n_vocab;
    model::Session s(*started.model, o.session());
    using clock = std::chrono::steady_clock;
    const bool all = !o.dump_logits.empty();
    std::vector<float> logits;
    const auto t0 = clock::now();
    s.eval(ids, &logits, all);
    const double prefill_s = std::chrono::duration<double>(clock::now() - t0).count();
    if (all) {
        // Replaced whole or not at all (a full disk left a partial file); a device such as
        // /dev/stdout is written in place.
        try {
            write_file(o.dump_logits, {reinterpret_cast<const char*>(logits.data()),
                                       logits.size() * sizeof(float)});
        } catch (const Error& e) {
            fail("--dump-logits-f32 {}", e.what());
        }
    }
    int32_t next = argmax(logits.data() + (all ? (int64_t(ids.size()) - 1) * V : 0), V);
    const auto t1 = clock::now();
    for (int i = 0; i < o.n_predict; ++i) {
        std::printf(i ? " %d" : "%d", next);
        std::fflush(stdout);
        if (i + 1 == o.n_predict) break;
        s.eval({next}, &logits);
        next = argmax(logits.data(), V);
    }
    if (o.n_predict > 0) std::printf("\n");
    const double gen_s = std::chrono::duration<double>(clock::now() - t1).count();
    std::fprintf(stderr, "prefill: %.2f t/s, generation: %.2f t/s\n", double(ids.size()) / prefill_s,
                 o.n_predict > 1 ? (o.n_predict - 1) / gen_s : 0.0);
    return 0;
}

}  // namespace ds4::cli
