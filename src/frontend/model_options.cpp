#include "frontend/model_options.h"

#include <cstdio>

#include "common/cli_checks.h"
#include "common/error.h"
#include "common/thread_count.h"
#include "gguf/reader.h"

namespace ds4::frontend {

model::OpenOptions ModelOptions::open_options() const {
    return {.threads = resolve_threads(threads),
            .load = no_mmap ? gguf::File::Load::Copy : gguf::File::Load::Map,
            .stream_experts = streaming.enabled};
}

void add_model_flags(CLI::App& app, ModelOptions& o, const FlagLook& look) {
    const std::string& eval_group = look.eval_group.empty() ? look.group : look.eval_group;
    auto* model = app.add_option("-m,--model", o.model, "GGUF model file (default ./ds4flash.gguf)")
                      ->option_text("FILE")
                      ->each([&o](const std::string&) { o.model_given = true; });
    if (!look.model_group.empty()) model->group(look.model_group);
    app.add_option(look.ctx_names, o.ctx, look.ctx_help)
        ->check(cli_checks::at_least(look.ctx_min))
        ->each([&o](const std::string&) { o.ctx_given = true; })
        ->group(look.group);
    app.add_option("-t,--threads", o.threads, "Threads (default 0: all cores; at most 4 per core)")
        ->check(cli_checks::thread_count())
        ->group(look.group);
    app.add_option("--prefill-chunk", o.prefill_chunk, look.prefill_help)
        ->check(cli_checks::at_least(1))
        ->group(eval_group);
    app.add_flag("--no-qat", [&o](int64_t) { o.qat = false; }, look.qat_help)->group(eval_group);
    app.add_flag("--no-mmap", [&o](int64_t) { o.no_mmap = true; }, gguf::File::kCopyHelp)->group(eval_group);
    app.add_flag("--warm-weights", o.warm_weights,
                 "Read every weight page at start-up (no page faults during the first tokens)")
        ->group(eval_group);
}

std::string flag_error(const ModelOptions& o) {
    try {
        streaming::check(o.streaming);
    } catch (const Error& e) {
        return e.what();
    }
    if (!o.steering.slots.empty() && o.dist.role != pipeline::Role::none)
        return "directional steering runs in one process: not with --role (a pipeline's layers are elsewhere)";
    return pipeline::dist_options_error(o.dist);
}

std::optional<int> parse(CLI::App& app, int argc, char** argv, ModelOptions& o) {
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    std::string why = resolve_steering(app, o.steering);
    if (why.empty()) why = flag_error(o);
    if (!why.empty()) {
        std::fprintf(stderr, "%s: %s\n", app.get_name().c_str(), why.c_str());
        return 2;
    }
    return std::nullopt;
}

std::vector<std::string> upstream_spellings(int argc, char** argv) {
    std::vector<std::string> args(argv, argv + argc);
    for (size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--") break;
        if (args[i] == "-sys") args[i] = "--system";
        else if (args[i].rfind("-sys=", 0) == 0) args[i] = "--system=" + args[i].substr(5);
    }
    return args;
}

}  // namespace ds4::frontend
