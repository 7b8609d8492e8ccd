// Directional steering's pieces (model/steering.h, blocks/steering.h, frontend/
// steering_options.h): the edit against a direct computation, the file checks and their
// messages, the flag pairing, and ds4-steer-build's arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "frontend/steering_options.h"
#include "model/blocks/steering.h"
#include "model/steering.h"
#include "support/tool_run.h"

namespace ds4 {
namespace {

std::vector<float> random_unit(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g;
    std::vector<float> v(static_cast<size_t>(n));
    double n2 = 0;
    for (float& x : v) {
        x = g(rng);
        n2 += double(x) * x;
    }
    for (float& x : v) x = float(x / std::sqrt(n2));
    return v;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

void write_floats(const std::string& path, const std::vector<float>& v) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 4));
}

TEST(Steering, EditMatchesTheDirectComputation) {
    const int64_t D = 96;
    const std::vector<float> v = random_unit(D, 1);
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> u(-3, 3);
    for (float s : {1.0f, -0.75f, 2.5f, 1e-3f}) {
        std::vector<float> F(static_cast<size_t>(D));
        for (float& x : F) x = u(rng);
        double dot = 0;
        for (int64_t i = 0; i < D; ++i) dot += double(v[size_t(i)]) * F[size_t(i)];
        std::vector<float> got = F;
        blocks::steer_row(got.data(), v.data(), s, D);
        for (int64_t i = 0; i < D; ++i) {
            const double want = double(F[size_t(i)]) - double(s) * double(v[size_t(i)]) * dot;
            EXPECT_NEAR(got[size_t(i)], want, 1e-5 * (1 + std::abs(want))) << "s " << s << " i " << i;
        }
        if (s == 1.0f) {  // s = 1 removes the direction
            double after = 0;
            for (int64_t i = 0; i < D; ++i) after += double(v[size_t(i)]) * got[size_t(i)];
            EXPECT_NEAR(after, 0.0, 1e-5);
        }
    }
}

TEST(Steering, DirectionChecksSayWhatIsWrong) {
    const uint32_t L = 3;
    const int64_t D = 8;
    std::vector<float> ok;
    for (uint32_t il = 0; il < L; ++il) {
        const auto v = random_unit(D, il + 10);
        ok.insert(ok.end(), v.begin(), v.end());
    }
    EXPECT_NO_THROW(model::check_directions(ok, L, D, "f"));
    std::vector<float> zero_layer = ok;
    std::fill(zero_layer.begin() + D, zero_layer.begin() + 2 * D, 0.0f);  // a layer left alone
    EXPECT_NO_THROW(model::check_directions(zero_layer, L, D, "f"));

    std::vector<float> short_ = ok;
    short_.pop_back();
    EXPECT_NE(error_of([&] { model::check_directions(short_, L, D, "dir.f32"); }).find("dir.f32: 23 floats (92 bytes), but this model needs 3 layers x 8 = 24 floats"),
              std::string::npos);
    std::vector<float> nan = ok;
    nan[size_t(D + 2)] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_NE(error_of([&] { model::check_directions(nan, L, D, "f"); }).find("layer 1 value 2 is not finite"),
              std::string::npos);
    std::vector<float> inf = ok;
    inf[0] = std::numeric_limits<float>::infinity();
    EXPECT_NE(error_of([&] { model::check_directions(inf, L, D, "f"); }).find("not finite"), std::string::npos);
    std::vector<float> longer = ok;
    for (int64_t i = 0; i < D; ++i) longer[size_t(2 * D + i)] *= 2;
    EXPECT_NE(error_of([&] { model::check_directions(longer, L, D, "f"); }).find("layer 2's direction has length 2.0"),
              std::string::npos);
}

TEST(Steering, FilesAndSidecarsAreChecked) {
    test::TempDir dir;
    const uint32_t L = 2;
    const int64_t D = 4;
    std::vector<float> dirs = random_unit(D, 3);
    const auto second = random_unit(D, 4);
    dirs.insert(dirs.end(), second.begin(), second.end());

    const std::string f = dir.file("d.f32");
    frontend::write_steering_file(f, dirs, L, D, R"({"component": "ffn_out"})");
    EXPECT_EQ(frontend::steering_sidecar(f), dir.file("d.json"));
    EXPECT_EQ(frontend::read_steering_file(f, L, D), dirs);
    const std::string side = test::run_command({"/bin/cat", dir.file("d.json")}).output;
    EXPECT_NE(side.find("\"ds4-directional-steering-v1\""), std::string::npos) << side;
    EXPECT_NE(side.find("\"component\": \"ffn_out\""), std::string::npos) << side;

    // The wrong model: the size names both shapes.
    EXPECT_NE(error_of([&] { frontend::read_steering_file(f, 3, D); }).find("needs 3 layers x 4"), std::string::npos);
    // Not whole floats.
    const std::string odd = dir.file("odd.bin");
    std::ofstream(odd, std::ios::binary).write("abcdefg", 7);
    EXPECT_NE(error_of([&] { frontend::read_steering_file(odd, L, D); }).find("7 bytes, not a whole number of f32"),
              std::string::npos);
    // NaN in a raw file without a sidecar.
    std::vector<float> nan = dirs;
    nan[5] = std::numeric_limits<float>::quiet_NaN();
    write_floats(dir.file("nan.bin"), nan);
    EXPECT_NE(error_of([&] { frontend::read_steering_file(dir.file("nan.bin"), L, D); }).find("not finite"),
              std::string::npos);
    // A sidecar of another format, or another shape.
    write_floats(dir.file("e.f32"), dirs);
    std::ofstream(dir.file("e.json")) << R"({"format": "something-else"})";
    EXPECT_NE(error_of([&] { frontend::read_steering_file(dir.file("e.f32"), L, D); })
                  .find("\"format\" is not \"ds4-directional-steering-v1\""),
              std::string::npos);
    std::ofstream(dir.file("e.json")) << R"({"format": "ds4-directional-steering-v1", "shape": [43, 4096]})";
    EXPECT_NE(error_of([&] { frontend::read_steering_file(dir.file("e.f32"), L, D); })
                  .find("\"shape\" [43,4096] does not match this model's [2, 4]"),
              std::string::npos);
}

TEST(Steering, ScaleFlagsBindToTheFileBeforeThem) {
    test::TempDir dir;
    std::ofstream(dir.file("a.f32")) << "x";
    std::ofstream(dir.file("b.f32")) << "x";
    auto parse = [&](std::vector<std::string> args, frontend::SteeringOptions& s) {
        CLI::App app{"t"};
        frontend::add_steering_flags(app, s);
        std::vector<std::string> argv = {"t"};
        argv.insert(argv.end(), args.begin(), args.end());
        std::vector<char*> ptrs;
        for (auto& a : argv) ptrs.push_back(a.data());
        app.parse(int(ptrs.size()), ptrs.data());
        return frontend::resolve_steering(app, s);
    };
    frontend::SteeringOptions s;
    ASSERT_EQ(parse({"--dir-steering-file", dir.file("a.f32"), "--dir-steering-ffn", "2", "--dir-steering-file",
                     dir.file("b.f32"), "--dir-steering-attn", "-0.5"},
                    s),
              "");
    ASSERT_EQ(s.slots.size(), 2u);
    EXPECT_EQ(s.slots[0].file, dir.file("a.f32"));
    EXPECT_EQ(s.slots[0].ffn, 2.0f);
    EXPECT_EQ(s.slots[0].attn, 0.0f);
    EXPECT_EQ(s.slots[1].file, dir.file("b.f32"));
    EXPECT_EQ(s.slots[1].ffn, 1.0f);  // the default with a file
    EXPECT_EQ(s.slots[1].attn, -0.5f);
    frontend::SteeringOptions lone;
    EXPECT_EQ(parse({"--dir-steering-ffn", "1"}, lone), "--dir-steering-ffn needs a --dir-steering-file before it");
    frontend::SteeringOptions bad;
    EXPECT_THROW(parse({"--dir-steering-file", dir.file("a.f32"), "--dir-steering-ffn", "nan"}, bad), CLI::ParseError);
}

TEST(Steering, BuildArithmetic) {
    // Layer 0: good - bad = (1, 1, 0), control (1, 0, 0): orthogonalised -> (0, 1, 0).
    // Layer 1: good - bad along the control only: nothing left -> zero (layer left alone).
    const std::vector<double> good = {2, 1, 0, 2, 0, 0}, bad = {1, 0, 0, 1, 0, 0};
    const std::vector<float> d = frontend::steering_direction(good, bad, 2, 3, true);
    EXPECT_NEAR(d[0], 0, 1e-7);
    EXPECT_NEAR(d[1], 1, 1e-7);
    EXPECT_NEAR(d[2], 0, 1e-7);
    EXPECT_EQ(d[3], 0);
    EXPECT_EQ(d[4], 0);
    EXPECT_EQ(d[5], 0);
    const std::vector<float> plain = frontend::steering_direction(good, bad, 2, 3, false);
    EXPECT_NEAR(plain[0], 1 / std::sqrt(2.0), 1e-7);
    EXPECT_NEAR(plain[1], 1 / std::sqrt(2.0), 1e-7);
    EXPECT_NEAR(plain[3], 1, 1e-7);
    EXPECT_NO_THROW(model::check_directions(d, 2, 3, "built"));
}

}  // namespace
}  // namespace ds4
