#include "frontend/startup.h"

#include <chrono>
#include <string>

#include "common/error.h"
#include "common/log.h"
#include "model/context_check.h"
#include "pipeline/pipeline_model.h"

namespace ds4::frontend {

Started start_model(const ModelOptions& o, const StartRequest& r) {
    if (o.dist.role == pipeline::Role::worker)
        fail("workers are `ds4 --role worker`; {} can only be the coordinator", r.tool);
    Started s;
    s.lock = InstanceLock::take(r.tool);
    s.used_memory = streaming::simulate_used_memory(o.streaming.simulate_used, r.tool);
    const model::OpenOptions open = o.open_options();
    s.threads = open.threads;
    s.model = pipeline::open_model(o.model, open, o.dist);
    if (auto steering = load_steering(*s.model, o.steering.slots)) {
        log::info("{}: {}", r.tool, describe(*steering));
        s.model->set_steering(std::move(steering));
    }
    if (r.tokenizer) s.tokenizer = tokenizer::Tokenizer::from_gguf(s.model->file());
    model::SequenceOptions seq = o.sequence();
    const uint64_t trained = s.model->info().trained_ctx;
    if (r.fit_trained_context && !o.ctx_given && seq.ctx > 0 && uint64_t(seq.ctx) > trained) {
        seq.ctx = int64_t(trained);
        log::info("{}: the model's trained context is {} tokens: using it (--ctx sets another)", r.tool, seq.ctx);
    }
    if (r.check_trained_context) model::check_trained_context(*s.model, seq.ctx, "--ctx");
    const std::string flag = r.sequences_flag ? std::string("--ctx with ") + r.sequences_flag : "--ctx";
    model::check_memory(*s.model, seq, r.sequences, flag.c_str());
    // The expert cache takes what is left after every sequence's KV state (and the spares').
    s.streaming = streaming::attach(*s.model, o.streaming,
                                    streaming::reserved_bytes(*s.model, seq, r.sequences + r.spare));
    s.ctx = seq.ctx;
    if (o.warm_weights) {  // what the process holds (with --ssd-streaming: not the routed experts)
        const auto t0 = std::chrono::steady_clock::now();
        const uint64_t bytes = warm_weights(s.model->file());
        log::info("{}: warmed {:.2f} GB of weights in {:.1f} s", r.tool, double(bytes) / 1e9,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return s;
}

pipeline::WorkerOptions worker_options(const ModelOptions& o) {
    return {.model_path = o.model,
            .open = o.open_options(),
            .seq = o.sequence(),
            .dist = o.dist,
            .on_open = [streaming = o.streaming, seq = o.sequence()](model::Model& m) -> std::shared_ptr<void> {
                // A worker holds up to pipeline::kMaxWorkerSessions sequences.
                return streaming::attach(m, streaming,
                                         streaming::reserved_bytes(m, seq, pipeline::kMaxWorkerSessions));
            }};
}

}  // namespace ds4::frontend
