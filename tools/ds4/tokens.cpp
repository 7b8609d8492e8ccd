#include "tokens.h"

#include <cstdio>
#include <string>

#include "chat/format.h"
#include "common/error.h"
#include "common/file_io.h"
#include "gguf/reader.h"
#include "prompt.h"
#include "tokenizer/tokenizer.h"

namespace ds4::cli {

std::string read_prompt(const Options& o) {
    if (!o.prompt_file.empty()) {
        try {
            return read_file(o.prompt_file);  // a directory is an error, not an empty prompt
        } catch (const Error& e) {
            fail("--prompt-file {}", e.what());
        }
    }
    return o.prompt;
}

OneTurn one_turn(const Options& o, std::string user) {
    return {.system = o.system, .prefix = o.prefix, .user = std::move(user), .thinking = o.thinking,
            .context_size = o.ctx};
}

int run_dump_tokens(const Options& o) {
    if (o.prompt_file.empty() && o.prompt.empty())
        fail("--dump-tokens needs -p TEXT or --prompt-file FILE");
    const std::string text = read_prompt(o);
    const auto file = gguf::File::open(o.model);
    const auto tok = tokenizer::Tokenizer::from_gguf(*file);
    const std::vector<int32_t> ids = o.raw ? tok->encode(text, tokenizer::Special::Plain)
                                           : one_turn_tokens(*chat::ChatFormat::from_gguf(*file, *tok),
                                                             one_turn(o, text));
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
