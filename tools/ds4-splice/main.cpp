// ds4-splice: copies the routed-expert tensors of chosen layers from a donor GGUF into a base
// GGUF of the same model, without requantising (quantize/splice.h, docs/QUANTIZE.md).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

#include "common/version.h"
#include "common/error.h"
#include "quantize/splice.h"

namespace {

constexpr const char* kFooter = R"(Example: q2 experts everywhere, q4 experts in layers 37-42:
  ds4-splice --base flash-q2.gguf --donor flash-q4.gguf --layers 37-42 --out flash-q2-q4tail.gguf

The base gives the metadata, the tensor order and every other tensor; the donor gives
blk.L.ffn_{gate,up,down}_exps.weight of each chosen layer, byte for byte, in its own type.
Both files must be the same model (architecture, layer count, widths, expert count, every
tensor's shape). The output is written under a temporary name and renamed when complete; it
records quantize.splice.layers and quantize.splice.donor.

Exit status: 0 written (or planned, with --dry-run); 1 error (different models, a layer out of
range, an existing --out without --force, I/O); other (CLI11's codes): bad command line.)";

std::string mib(uint64_t b) { return fmt::format("{:.2f} MiB", double(b) / double(1 << 20)); }

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"ds4-splice: routed experts of chosen layers from a donor GGUF into a base GGUF"};
    ds4::add_version_flag(app, "ds4-splice");
    app.footer(kFooter);
    std::string base, donor, layers, out;
    bool dry_run = false, force = false;
    app.add_option("--base", base, "base GGUF (metadata, order, every other tensor)")->required();
    app.add_option("--donor", donor, "donor GGUF of the same model")->required();
    app.add_option("--layers", layers, "layers whose experts come from the donor: 37-42, 3,5,40-42")->required();
    app.add_option("--out", out, "output GGUF");
    app.add_flag("--dry-run", dry_run, "list the tensors that would be replaced and the new size");
    app.add_flag("--force", force, "replace an existing --out");
    CLI11_PARSE(app, argc, argv);
    try {
        const auto set = ds4::quantize::parse_layer_list(layers);
        const auto plan = ds4::quantize::plan_splice(base, donor, set);
        for (const auto& it : plan.replaced)
            std::printf("%-34s %-8s -> %-8s %12s -> %s\n", it.name.c_str(), it.base_type.c_str(), it.donor_type.c_str(),
                        mib(it.base_bytes).c_str(), mib(it.donor_bytes).c_str());
        std::printf("%zu tensors from %s; tensor data %s\n", plan.replaced.size(), donor.c_str(),
                    mib(plan.out_tensor_bytes).c_str());
        if (dry_run) return 0;
        if (out.empty()) ds4::fail("--out is required unless --dry-run");
        if (std::filesystem::exists(out) && !force) ds4::fail("{} exists; use --force to replace it", out);
        ds4::quantize::write_splice(base, donor, set, layers, out);
        std::printf("wrote %s (%llu bytes)\n", out.c_str(), (unsigned long long)std::filesystem::file_size(out));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ds4-splice: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
