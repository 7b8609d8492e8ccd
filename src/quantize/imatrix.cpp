#include "quantize/imatrix.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common/error.h"
#include "common/file_io.h"
#include "gguf/reader.h"

namespace ds4::quantize {
namespace {

constexpr int32_t kMaxName = 4096;

struct Cursor {
    const std::string& path;
    const std::vector<char>& bytes;
    size_t pos = 0;
    template <class T>
    T get(const char* what) {
        T v;
        if (bytes.size() - pos < sizeof(T)) fail("{}: truncated at byte {} reading {}", path, pos, what);
        std::memcpy(&v, bytes.data() + pos, sizeof(T));
        pos += sizeof(T);
        return v;
    }
    std::string str(int32_t len, const char* what) {
        if (len < 0 || len > kMaxName || bytes.size() - pos < size_t(len))
            fail("{}: bad {} length {} at byte {}", path, what, len, pos);
        std::string s(bytes.data() + pos, size_t(len));
        pos += size_t(len);
        return s;
    }
};

Imatrix load_legacy(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("{}: cannot open imatrix", path);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Cursor c{path, bytes};
    Imatrix m;
    const int32_t n = c.get<int32_t>("entry count");
    if (n < 0) fail("{}: negative entry count {}", path, n);
    for (int32_t e = 0; e < n; ++e) {
        const std::string name = c.str(c.get<int32_t>("name length"), "name");
        const int32_t ncall = c.get<int32_t>("ncall");
        const int32_t nval = c.get<int32_t>("value count");
        if (nval <= 0 || size_t(nval) > (bytes.size() - c.pos) / 4)
            fail("{}: entry '{}' has {} values, {} bytes left", path, name, nval, bytes.size() - c.pos);
        std::vector<float> v(static_cast<size_t>(nval));
        std::memcpy(v.data(), bytes.data() + c.pos, v.size() * 4);
        c.pos += v.size() * 4;
        if (ncall > 0)
            for (float& x : v) x = x / float(ncall);
        m.entries[name] = std::move(v);
    }
    if (c.pos < bytes.size()) {  // optional trailer: chunk count and dataset name
        m.chunks = c.get<int32_t>("chunk count");
        m.datasets.push_back(c.str(c.get<int32_t>("dataset length"), "dataset name"));
    }
    return m;
}

Imatrix load_gguf(const std::string& path) {
    auto f = gguf::File::open(path);
    Imatrix m;
    constexpr std::string_view kSum = ".in_sum2";
    for (const auto& t : f->tensors()) {
        const std::string_view n = t.name;
        if (n.size() <= kSum.size() || n.substr(n.size() - kSum.size()) != kSum) continue;
        const std::string name(n.substr(0, n.size() - kSum.size()));
        const gguf::TensorInfo* counts = f->find_tensor(name + ".counts");
        if (!counts || t.type != TensorType::F32 || counts->type != TensorType::F32)
            fail("{}: imatrix entry '{}' lacks an F32 .counts tensor", path, name);
        const int64_t ne0 = t.ne[0], nc = counts->n_elements();
        if (nc < 1 || t.n_elements() != ne0 * nc)
            fail("{}: imatrix entry '{}': {} sums for {} counts", path, name, t.n_elements(), nc);
        const float* sums = reinterpret_cast<const float*>(f->data(t));
        const float* cnt = reinterpret_cast<const float*>(f->data(*counts));
        std::vector<float> v(static_cast<size_t>(t.n_elements()));
        for (int64_t j = 0; j < nc; ++j)
            for (int64_t i = 0; i < ne0; ++i)
                v[size_t(j * ne0 + i)] = cnt[j] > 0.0f ? sums[j * ne0 + i] / cnt[j] : 1.0f;
        m.entries[name] = std::move(v);
    }
    if (m.entries.empty()) fail("{}: a GGUF file with no imatrix entries (*.in_sum2)", path);
    return m;
}

}  // namespace

Imatrix Imatrix::load(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) fail("{}: cannot open imatrix", path);
    uint32_t magic = 0;
    const bool got = std::fread(&magic, 4, 1, f) == 1;
    std::fclose(f);
    return got && magic == gguf::kMagic ? load_gguf(path) : load_legacy(path);
}

void Imatrix::save_legacy(const std::string& path) const {
    std::string out;
    auto put = [&out](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
    const int32_t n = int32_t(entries.size());
    put(&n, 4);
    for (const auto& [name, v] : entries) {
        const int32_t len = int32_t(name.size()), ncall = 1, nval = int32_t(v.size());
        put(&len, 4), put(name.data(), name.size()), put(&ncall, 4), put(&nval, 4);
        put(v.data(), v.size() * 4);
    }
    const int32_t chunk_count = chunks;
    const std::string ds = datasets.empty() ? std::string() : datasets[0];
    const int32_t dlen = int32_t(ds.size());
    put(&chunk_count, 4), put(&dlen, 4), put(ds.data(), ds.size());
    write_file(path, out);
}

const float* Imatrix::weights(const std::string& name, int64_t n_per_row, int64_t n_matrices, int64_t index) const {
    const auto it = entries.find(name);
    if (it == entries.end()) return nullptr;
    const int64_t size = int64_t(it->second.size());
    if (size == n_per_row) return it->second.data();
    if (size == n_per_row * n_matrices) return it->second.data() + index * n_per_row;
    fail("imatrix entry '{}' has {} values: expected {} or {} x {}", name, size, n_per_row, n_matrices, n_per_row);
}

}  // namespace ds4::quantize
