// Shared by the kvcache_*_test.cpp files: a scratch directory and small helpers.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kvcache/disk_cache.h"

namespace kvtest {

namespace fs = std::filesystem;
using namespace ds4::kvcache;

inline ModelId model_a() {
    ModelId m{};
    for (int i = 0; i < 16; ++i) m[size_t(i)] = uint8_t(i + 1);
    return m;
}

inline ModelId model_b() {
    ModelId m = model_a();
    m[7] ^= 0x40;
    return m;
}

// A fresh directory under $TMPDIR (or /tmp), removed at the end.
struct TempDir {
    std::string path;
    TempDir() {
        const char* base = getenv("TMPDIR");
        std::string t = std::string(base && *base ? base : "/tmp") + "/ds4_kvcache_XXXXXX";
        if (!mkdtemp(t.data())) ADD_FAILURE() << "mkdtemp failed";
        path = t;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

inline Options options(const std::string& dir, uint64_t budget, ModelId id = model_a(), uint32_t version = 7) {
    Options o;
    o.dir = dir;
    o.budget_bytes = budget;
    o.model_id = id;
    o.payload_version = version;
    return o;
}

inline std::vector<uint8_t> payload(size_t n, uint32_t seed) {
    std::vector<uint8_t> p(n);
    uint32_t x = seed * 2654435761u + 1;
    for (auto& b : p) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b = uint8_t(x);
    }
    return p;
}

// Sum of the sizes of every regular file in dir, and the names.
inline uint64_t dir_bytes(const std::string& dir, std::vector<std::string>* names = nullptr) {
    uint64_t n = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
        if (!e.is_regular_file()) continue;
        n += e.file_size();
        if (names) names->push_back(e.path().filename().string());
    }
    return n;
}

inline bool has_temp(const std::string& dir) {
    std::vector<std::string> names;
    dir_bytes(dir, &names);
    for (const auto& n : names)
        if (n.find(".tmp.") != std::string::npos) return true;
    return false;
}

}  // namespace kvtest
