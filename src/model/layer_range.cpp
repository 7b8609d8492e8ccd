#include "model/layer_range.h"

#include <charconv>

#include "common/error.h"

namespace ds4::model {

std::string LayerRange::str() const {
    return std::to_string(first) + ":" + (output ? std::string("output") : std::to_string(last));
}

LayerRange LayerRange::all(uint32_t n_layer) {
    if (n_layer == 0) fail("a model without layers has no layer range");
    return LayerRange{0, n_layer - 1, true};
}

LayerRange LayerRange::parse(std::string_view spec, uint32_t n_layer) {
    if (spec.empty()) return all(n_layer);
    auto bad = [&](std::string_view why) -> LayerRange {
        fail("layer range '{}': {} (expected A:B with 0 <= A <= B <= {}, or A:output)", spec, why,
             n_layer == 0 ? 0 : n_layer - 1);
    };
    const size_t colon = spec.find(':');
    if (colon == std::string_view::npos) return bad("no ':'");
    auto number = [&](std::string_view s, uint32_t& v) {
        const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
    };
    const std::string_view a = spec.substr(0, colon), b = spec.substr(colon + 1);
    LayerRange r;
    if (!number(a, r.first)) return bad("the first layer is not a number");
    if (b == "output") {
        r.last = n_layer - 1;
        r.output = true;
    } else {
        if (!number(b, r.last)) return bad("the last layer is neither a number nor 'output'");
        r.output = false;
    }
    if (r.first >= n_layer || r.last >= n_layer) return bad("layer out of range");
    if (r.first > r.last) return bad("the first layer is after the last");
    return r;
}

}  // namespace ds4::model
