#include "frontend/steering_options.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/error.h"
#include "common/file_io.h"

namespace ds4::frontend {

namespace {

CLI::Validator finite_scale() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            size_t used = 0;
            double v = 0;
            try {
                v = std::stod(text, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (used == 0 || used != text.size() || !std::isfinite(v)) return "'" + text + "' is not a finite number";
            return {};
        },
        "SCALE");
}

void check_sidecar(const std::string& path, uint32_t n_layer, int64_t n_embd) {
    const std::string side = steering_sidecar(path);
    if (!std::filesystem::exists(side)) return;
    std::ifstream in(side);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
        fail("{}: not JSON ({})", side, e.what());
    }
    if (!j.is_object() || !j.contains("format") || j["format"] != kSteeringFormat)
        fail("{}: \"format\" is not \"{}\"", side, kSteeringFormat);
    if (j.contains("shape")) {
        const nlohmann::json& s = j["shape"];
        if (!s.is_array() || s.size() != 2 || !s[0].is_number_integer() || !s[1].is_number_integer() ||
            s[0].get<int64_t>() != int64_t(n_layer) || s[1].get<int64_t>() != n_embd)
            fail("{}: \"shape\" {} does not match this model's [{}, {}]", side, s.dump(), n_layer, n_embd);
    }
}

}  // namespace

void add_steering_flags(CLI::App& app, SteeringOptions& s, const std::string& group) {
    s.file_opt = app.add_option("--dir-steering-file", s.files,
                                "Directional steering: n_layer x n_embd f32 unit directions (repeatable; "
                                "docs/STEERING.md)")
                     ->option_text("FILE")
                     ->check(CLI::ExistingFile)
                     ->group(group);
    s.ffn_opt = app.add_option("--dir-steering-ffn", s.ffn,
                               "Steering scale after the FFN output, for the file before it (default 1; "
                               "negative amplifies)")
                    ->option_text("S")
                    ->check(finite_scale())
                    ->group(group);
    s.attn_opt = app.add_option("--dir-steering-attn", s.attn,
                                "Steering scale after the attention output, for the file before it (default 0)")
                     ->option_text("S")
                     ->check(finite_scale())
                     ->group(group);
}

std::string resolve_steering(const CLI::App& app, SteeringOptions& s) {
    s.slots.clear();
    size_t nf = 0, nffn = 0, nattn = 0;
    for (const CLI::Option* opt : app.parse_order()) {
        if (opt == s.file_opt) {
            s.slots.push_back({.file = s.files.at(nf++)});
        } else if (opt == s.ffn_opt || opt == s.attn_opt) {
            const bool ffn = opt == s.ffn_opt;
            if (s.slots.empty())
                return fmt::format("{} needs a --dir-steering-file before it", ffn ? "--dir-steering-ffn"
                                                                                   : "--dir-steering-attn");
            if (ffn) s.slots.back().ffn = s.ffn.at(nffn++);
            else s.slots.back().attn = s.attn.at(nattn++);
        }
    }
    return {};
}

std::string steering_sidecar(const std::string& path) {
    const std::filesystem::path p(path);
    if (p.extension() == ".f32") return std::filesystem::path(p).replace_extension(".json").string();
    return path + ".json";
}

std::vector<float> read_steering_file(const std::string& path, uint32_t n_layer, int64_t n_embd) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("{}: cannot open the steering file", path);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() % 4 != 0) fail("{}: {} bytes, not a whole number of f32 values", path, bytes.size());
    std::vector<float> dirs(bytes.size() / 4);
    std::memcpy(dirs.data(), bytes.data(), bytes.size());  // little-endian hosts only (x86-64)
    model::check_directions(dirs, n_layer, n_embd, path);
    check_sidecar(path, n_layer, n_embd);
    return dirs;
}

std::shared_ptr<const model::Steering> load_steering(const model::Model& model,
                                                     const std::vector<SteeringFlag>& slots) {
    if (slots.empty()) return nullptr;
    auto s = std::make_shared<model::Steering>();
    s->n_layer = model.info().n_layer;
    s->n_embd = model.info().n_embd;
    for (const SteeringFlag& f : slots)
        s->slots.push_back({.directions = read_steering_file(f.file, s->n_layer, s->n_embd),
                            .attn = f.attn,
                            .ffn = f.ffn,
                            .source = f.file});
    return s;
}

namespace {

double norm(const double* v, int64_t n) {
    double n2 = 0.0;
    for (int64_t i = 0; i < n; ++i) n2 += v[i] * v[i];
    return std::sqrt(n2);
}

void normalize(double* v, int64_t n) {
    const double l = norm(v, n);
    if (l > 0.0)
        for (int64_t i = 0; i < n; ++i) v[i] /= l;
}

}  // namespace

std::vector<float> steering_direction(const std::vector<double>& good_mean, const std::vector<double>& bad_mean,
                                      uint32_t n_layer, int64_t n_embd, bool orthogonalize) {
    const size_t N = size_t(n_layer) * size_t(n_embd);
    if (good_mean.size() != N || bad_mean.size() != N) fail("steering_direction: means are not {} x {}", n_layer, n_embd);
    std::vector<float> out(N);
    std::vector<double> d(static_cast<size_t>(n_embd)), c(static_cast<size_t>(n_embd));
    for (uint32_t il = 0; il < n_layer; ++il) {
        const size_t o = size_t(il) * size_t(n_embd);
        for (int64_t i = 0; i < n_embd; ++i) {
            d[size_t(i)] = good_mean[o + size_t(i)] - bad_mean[o + size_t(i)];
            c[size_t(i)] = bad_mean[o + size_t(i)];
        }
        normalize(d.data(), n_embd);
        if (orthogonalize) {
            normalize(c.data(), n_embd);
            double dc = 0.0;
            for (int64_t i = 0; i < n_embd; ++i) dc += d[size_t(i)] * c[size_t(i)];
            for (int64_t i = 0; i < n_embd; ++i) d[size_t(i)] -= dc * c[size_t(i)];
            // What is left when good - bad is (almost) along the control mean is noise: none.
            if (norm(d.data(), n_embd) < 1e-6) std::fill(d.begin(), d.end(), 0.0);
            normalize(d.data(), n_embd);
        }
        for (int64_t i = 0; i < n_embd; ++i) out[o + size_t(i)] = float(d[size_t(i)]);
    }
    return out;
}

void write_steering_file(const std::string& path, const std::vector<float>& dirs, uint32_t n_layer, int64_t n_embd,
                         const std::string& extra_json) {
    model::check_directions(dirs, n_layer, n_embd, path);
    nlohmann::json j = nlohmann::json::object();
    if (!extra_json.empty()) j = nlohmann::json::parse(extra_json);
    j["format"] = kSteeringFormat;
    j["shape"] = {n_layer, n_embd};
    write_file(path, std::string_view(reinterpret_cast<const char*>(dirs.data()), dirs.size() * sizeof(float)));
    write_file(steering_sidecar(path), j.dump(2) + "\n");
}

std::string describe(const model::Steering& s) {
    std::string out = fmt::format("directional steering, {} file{}:", s.slots.size(), s.slots.size() == 1 ? "" : "s");
    for (const model::SteeringSlot& slot : s.slots)
        out += fmt::format(" {} (ffn {:g}, attn {:g})", slot.source, slot.ffn, slot.attn);
    return out;
}

}  // namespace ds4::frontend
