#include "inspect.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "gguf/reader.h"
#include "model/model.h"

namespace ds4::cli {
namespace {

std::string human_bytes(uint64_t n) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = double(n);
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, ++u;
    return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.1f} {}", v, units[u]);
}

std::string type_column(const gguf::Value& v) {
    if (!v.is_array()) return gguf::value_type_name(v.type);
    return fmt::format("{}[{}]", gguf::value_type_name(v.elem_type), v.elems.size());
}

}  // namespace

void print_inspect(const gguf::File& f, std::FILE* out) {
    fmt::print(out, "file: {} ({} bytes, {})\n", f.path(), f.file_size(),
               human_bytes(f.file_size()));
    fmt::print(out, "GGUF version {}, alignment {}, tensor data at byte {}\n", f.version(),
               f.alignment(), f.data_offset());

    const auto& md = f.metadata();
    size_t key_w = 3, type_w = 4;
    for (const auto& [k, v] : md) {
        key_w = std::max(key_w, k.size());
        type_w = std::max(type_w, type_column(v).size());
    }
    fmt::print(out, "\nmetadata: {} keys\n", md.size());
    fmt::print(out, "  {:<{}}  {:<{}}  {}\n", "key", key_w, "type", type_w, "value");
    for (const auto& [k, v] : md)
        fmt::print(out, "  {:<{}}  {:<{}}  {}\n", k, key_w, type_column(v), type_w, v.to_string());

    const auto& ts = f.tensors();
    size_t name_w = 4, shape_w = 5;
    for (const auto& t : ts) {
        name_w = std::max(name_w, t.name.size());
        shape_w = std::max(shape_w, t.shape_string().size());
    }
    fmt::print(out, "\ntensors: {}\n", ts.size());
    fmt::print(out, "  {:<{}}  {:<7}  {:<{}}  {:>14}  {:>14}\n", "name", name_w, "type", "shape",
               shape_w, "offset", "bytes");
    uint64_t params = 0, bytes = 0;
    std::map<std::string, std::pair<size_t, uint64_t>> per_type;  // count, bytes
    for (const auto& t : ts) {
        const std::string type = tensor_type_name(t.type);
        fmt::print(out, "  {:<{}}  {:<7}  {:<{}}  {:>14}  {:>14}\n", t.name, name_w, type,
                   t.shape_string(), shape_w, t.offset, t.n_bytes);
        params += uint64_t(t.n_elements());
        bytes += t.n_bytes;
        auto& pt = per_type[type];
        ++pt.first;
        pt.second += t.n_bytes;
    }
    fmt::print(out, "\nby type:\n");
    for (const auto& [type, cb] : per_type)
        fmt::print(out, "  {:<7}  {:>6} tensors  {:>14} bytes ({})\n", type, cb.first, cb.second,
                   human_bytes(cb.second));
    fmt::print(out, "\ntotal: {} parameters, {} bytes of tensor data ({})\n", params, bytes,
               human_bytes(bytes));
}

int run_inspect(const std::string& path) {
    const auto f = gguf::File::open(path);
    print_inspect(*f, stdout);
    std::fflush(stdout);
    std::fprintf(stdout, "\n%s", model::describe(*f).c_str());
    return 0;
}

}  // namespace ds4::cli
