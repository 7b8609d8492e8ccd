#include "tokens.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "common/error.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

namespace ds4::cli {

std::string read_prompt(const Options& o) {
    if (!o.prompt_file.empty()) {
        std::ifstream in(o.prompt_file, std::ios::binary);
        if (!in) fail("{}: cannot open prompt file", o.prompt_file);
        std::ostringstream ss;
        ss << in.rdbuf();
        if (in.bad()) fail("{}: read error", o.prompt_file);
        return ss.str();
    }
    return o.prompt;
}

int run_dump_tokens(const Options& o) {
    if (!o.raw)
        fail("--dump-tokens without --raw (the rendered chat prompt) is not available yet; "
             "use --dump-tokens --raw for the prompt's literal bytes");
    if (o.prompt_file.empty() && o.prompt.empty())
        fail("--dump-tokens needs -p TEXT or --prompt-file FILE");
    const std::string text = read_prompt(o);
    const auto file = gguf::File::open(o.model);
    const auto tok = tokenizer::Tokenizer::from_gguf(*file);
    const std::vector<int32_t> ids = tok->encode(text, tokenizer::Special::Plain);
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) line += ' ';
        line += std::to_string(ids[i]);
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace ds4::cli
