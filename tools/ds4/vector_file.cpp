// The official.vec parser (vectors.h), apart from the run so tests compile it alone.
#include "vectors.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "common/data_path.h"
#include "common/error.h"

namespace ds4::cli {
namespace {

bool hex_bytes(const std::string& hex, std::string& out) {
    if (hex.empty() || hex.size() % 2) return false;
    out.clear();
    for (size_t i = 0; i < hex.size(); i += 2) {
        int v = 0;
        for (size_t j = i; j < i + 2; ++j) {
            const char c = hex[j];
            const int d = c >= '0' && c <= '9'   ? c - '0'
                          : c >= 'a' && c <= 'f' ? c - 'a' + 10
                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
            if (d < 0) return false;
            v = v * 16 + d;
        }
        out += char(v);
    }
    return true;
}

}  // namespace

std::vector<VectorCase> read_vectors(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail("{}: cannot read the vector file", path);
    std::vector<VectorCase> cases;
    VectorCase* open = nullptr;
    VectorStep* step = nullptr;
    size_t declared_tops = 0;
    auto close_step = [&](int n) {
        if (step && step->top.size() != declared_tops)
            fail("{}:{}: the step before has {} top lines, it declares {}", path, n, step->top.size(), declared_tops);
    };
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
        ++n;
        const size_t b = line.find_first_not_of(" \t\r");
        if (b == std::string::npos || line[b] == '#') continue;
        std::istringstream ls(line.substr(b));
        std::string kw, extra;
        ls >> kw;
        if (kw == "case") {
            if (open) fail("{}:{}: case {} has no \"end\"", path, n, open->id);
            VectorCase c;
            int64_t steps = 0;
            if (!(ls >> c.id >> c.ctx >> steps >> c.prompt_file) || (ls >> extra) || c.ctx < 2 || steps < 1 || steps > 4096)
                fail("{}:{}: expected \"case <id> <ctx> <steps> <prompt-file>\"", path, n);
            c.prompt_file = resolve_data_path(path, c.prompt_file);
            c.steps.resize(size_t(steps));
            cases.push_back(std::move(c));
            open = &cases.back();
            step = nullptr;
        } else if (kw == "step") {
            if (!open) fail("{}:{}: a step outside a case", path, n);
            close_step(n);
            int64_t index = -1, tops = -1;
            std::string hex, bytes;
            if (!(ls >> index >> hex >> tops) || (ls >> extra) || !hex_bytes(hex, bytes) || tops < 0 || tops > 128)
                fail("{}:{}: expected \"step <index> <selected-hex> <top-count>\"", path, n);
            if (index < 0 || index >= int64_t(open->steps.size()) || !open->steps[size_t(index)].selected.empty())
                fail("{}:{}: step {} is out of range or repeated (case {} has {} steps)", path, n, index, open->id, open->steps.size());
            step = &open->steps[size_t(index)];
            step->selected = bytes;
            declared_tops = size_t(tops);
        } else if (kw == "top") {
            if (!step) fail("{}:{}: a top line outside a step", path, n);
            std::string hex, bytes;
            double lp = 0;
            if (!(ls >> hex >> lp) || (ls >> extra) || !hex_bytes(hex, bytes) || !std::isfinite(lp) || lp > 0)
                fail("{}:{}: expected \"top <token-hex> <logprob <= 0>\"", path, n);
            if (step->top.size() == declared_tops) fail("{}:{}: more top lines than the step declares ({})", path, n, declared_tops);
            step->top.push_back({bytes, lp});
        } else if (kw == "end") {
            if (!open) fail("{}:{}: \"end\" outside a case", path, n);
            close_step(n);
            for (size_t i = 0; i < open->steps.size(); ++i)
                if (open->steps[i].selected.empty()) fail("{}:{}: case {} has no step {}", path, n, open->id, i);
            open = nullptr;
            step = nullptr;
        } else {
            fail("{}:{}: unexpected line '{}'", path, n, line);
        }
    }
    if (open) fail("{}: case {} has no \"end\"", path, open->id);
    if (cases.empty()) fail("{}: no cases", path);
    return cases;
}

}  // namespace ds4::cli
