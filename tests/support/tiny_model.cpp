#include "support/tiny_model.h"

namespace ds4::oracle {

RunResult write_tiny_model(const std::string& path, const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {binary("ds4-gguf-gen"), "-q", "--preset", "tiny", "--real-vocab"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back("-o");
    argv.push_back(path);
    return run_command(argv);
}

}  // namespace ds4::oracle
