#include "support/tiny_model.h"

#include <algorithm>

#include "common/error.h"

namespace ds4::test {

RunResult write_tiny_model(const std::string& path, const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {binary("ds4-gguf-gen"), "-q", "--preset", "tiny", "--real-vocab"};
    // The default model's declared context (scripts/run-default.sh), unless the test sets one.
    if (std::find(extra.begin(), extra.end(), "--ctx") == extra.end()) argv.insert(argv.end(), {"--ctx", kDefaultModelCtx});
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back("-o");
    argv.push_back(path);
    return run_command(argv);
}

std::string generate_model(const TempDir& dir, const std::string& name, const std::vector<std::string>& args) {
    const std::string path = dir.file(name);
    std::vector<std::string> argv = {binary("ds4-gguf-gen"), "-q", "-o", path};
    argv.insert(argv.end(), args.begin(), args.end());
    const RunResult r = run_command(argv);
    if (r.exit_code != 0) fail("ds4-gguf-gen failed ({}): {}", r.exit_code, r.output);
    return path;
}

}  // namespace ds4::test
