// libFuzzer target for the GGUF reader: any byte string must either parse or throw
// ds4::Error -- never crash, overread, overflow or allocate without bound. On success every
// value and every tensor byte is touched, so a directory entry that points outside the
// image shows up as an ASan report rather than going unnoticed.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "common/error.h"
#include "gguf/reader.h"

namespace {

volatile uint64_t g_sink;  // keeps the reads below from being optimized away

void touch(const ds4::gguf::File& f) {
    using namespace ds4::gguf;
    uint64_t h = f.version() + f.alignment() + f.data_offset();
    for (const auto& [key, v] : f.metadata()) {
        h += v.to_string().size() + key.size();
        h += v.as_int().value_or(0) + v.as_uint().value_or(0);
        h += uint64_t(v.as_double().value_or(0.0) != 0.0);
        if (const std::string* s = v.as_string()) h += s->size();
        for (size_t i = 0; i < v.elems.size(); ++i)
            h += v.elem_int(i).value_or(0) + uint64_t(v.elem_double(i).value_or(0.0) != 0.0);
        if (f.find(key) != &v) __builtin_trap();  // lookup must find the stored value
        // The typed getters may throw for the wrong kind; they must not crash.
        try { h += f.get_u32(key); } catch (const ds4::Error&) {}
        try { h += f.get_u64(key); } catch (const ds4::Error&) {}
        try { h += uint64_t(f.get_f32(key) != 0.0f); } catch (const ds4::Error&) {}
        try { h += f.get_bool(key); } catch (const ds4::Error&) {}
        try { h += f.get_string(key).size(); } catch (const ds4::Error&) {}
    }
    for (const TensorInfo& t : f.tensors()) {
        if (f.find_tensor(t.name) != &t) __builtin_trap();
        h += t.shape_string().size() + uint64_t(t.n_elements());
        if (f.data_offset() + t.offset + t.n_bytes > f.file_size()) __builtin_trap();
        const uint8_t* p = f.data(t);
        for (uint64_t i = 0; i < t.n_bytes; i += 61) h += p[i];  // sampled; catches overreads
        if (t.n_bytes) h += p[t.n_bytes - 1];
    }
    g_sink = h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        auto f = ds4::gguf::File::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
        touch(*f);
    } catch (const ds4::Error& e) {
        // Expected for malformed input; the message must stay one line whatever the names.
        if (std::strchr(e.what(), '\n')) __builtin_trap();
    }
    return 0;
}
