// ds4-gguf-split: writes the tensors of a layer range of a deepseek4 GGUF into a standalone
// GGUF (a split file, model/deepseek4/split.h), e.g. the two halves of a model too large for
// one machine's memory, each loaded with its own --layers.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "common/version.h"
#include "model/deepseek4/split.h"

namespace {

constexpr const char* kFooter = R"(Layer ranges (inclusive, as every --layers of this project):
  A:B       trunk layers A..B (0 <= A <= B < layers); with the token embedding when A is 0
  A:output  layers A..last and the output head (output_hc_*, output_norm, output.weight)
  0:output  the whole model

The split file holds exactly the tensors the range needs (blk.A.* .. blk.B.*, token_embd when
the range starts at 0, the head with :output), byte for byte, in the model's order and at its
alignment. Every metadata key is copied unchanged, plus ds4.split.layers = "A:B" recording the
range; the model's metadata hash ignores that key, so saved states of the whole model and of
its ranges stay compatible. The file is written under a temporary name and renamed into place
(an existing OUT is replaced only by a complete file). The input may itself be a split file
holding the range.

Load a split file with the range it holds, e.g. for a 61-layer model:
  ds4-gguf-split -m pro-q4.gguf --layers 0:30 -o pro-q4-00-30.gguf
  ds4-gguf-split -m pro-q4.gguf --layers 31:output -o pro-q4-31-output.gguf
  ds4 --inspect pro-q4-00-30.gguf      (reports the range the file holds)
Opening it for other layers fails naming the missing tensor and the range it holds.

Exit status: 0 written; 1 error (not a deepseek4 GGUF, range outside the model or not held by
the input, I/O), with nothing written; other (CLI11's codes, e.g. 106 for a missing option):
bad command line.)";

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"ds4-gguf-split: write a layer range of a deepseek4 GGUF as a standalone GGUF"};
    ds4::add_version_flag(app, "ds4-gguf-split");
    app.footer(kFooter);
    app.get_formatter()->column_width(30);
    std::string in, out, layers;
    bool quiet = false;
    app.add_option("-m,--model", in, "input deepseek4 GGUF (a whole model or a split holding the range)")
        ->required();
    app.add_option("--layers", layers, "the range to write: A:B or A:output (see below)")->required();
    app.add_option("-o,--output", out, "output GGUF (must not be the input)")->required();
    app.add_flag("-q,--quiet", quiet, "no summary line");
    CLI11_PARSE(app, argc, argv);

    try {
        const auto s = ds4::deepseek4::write_split(in, layers, out);
        if (!quiet)
            std::fprintf(stderr, "ds4-gguf-split: wrote %s: layers %s, %zu tensors, %llu bytes of tensor data, %llu bytes\n",
                         out.c_str(), s.range.str().c_str(), s.tensors, (unsigned long long)s.tensor_bytes,
                         (unsigned long long)s.file_bytes);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ds4-gguf-split: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
