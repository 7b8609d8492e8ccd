#include "support/route_dump.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace ds4::oracle {

RouteDump load_route_dump(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail("{}: cannot open route dump", path);
    RouteDump dump;
    std::string line;
    for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
        if (line.empty()) continue;
        std::istringstream words(line);
        long long layer = -1, pos = -1;
        if (!(words >> layer >> pos) || layer < 0 || pos < 0) {
            fail("{}:{}: expected '<layer> <pos> <id>...', got '{}'", path, line_no, line);
        }
        std::vector<int32_t> ids;
        long long id = 0;
        while (words >> id) {
            if (id < 0 || id > INT32_MAX) fail("{}:{}: id {} out of range", path, line_no, id);
            ids.push_back(static_cast<int32_t>(id));
        }
        if (!words.eof()) fail("{}:{}: non-numeric id in '{}'", path, line_no, line);
        if (!dump.emplace(RouteKey{static_cast<int>(layer), pos}, std::move(ids)).second) {
            fail("{}:{}: layer {} position {} appears twice", path, line_no, layer, pos);
        }
    }
    return dump;
}

RouteDiff compare_routes(const RouteDump& ref, const RouteDump& test) {
    RouteDiff d;
    for (const auto& [key, ids] : ref) {
        const auto it = test.find(key);
        if (it == test.end()) {
            ++d.n_missing;
            continue;
        }
        ++d.n_compared;
        std::vector<int32_t> a = ids, b = it->second;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        if (a != b) {
            if (d.n_differ == 0) d.first_differ = key;  // map order: the smallest key
            ++d.n_differ;
        }
    }
    for (const auto& entry : test) d.n_missing += ref.count(entry.first) ? 0 : 1;
    return d;
}

}  // namespace ds4::oracle
