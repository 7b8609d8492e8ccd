// The discrete decisions ds4-oracle writes with --dump-experts / --dump-indexer: one text line
// per (layer, position), "<layer> <pos> <id> <id> ..." (docs/ORACLE_HARNESS.md). Our engine
// writes the same format so the two can be compared directly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ds4::oracle {

using RouteKey = std::pair<int, int64_t>;  // (layer, position)
using RouteDump = std::map<RouteKey, std::vector<int32_t>>;

// Parses a dump; throws ds4::Error naming the file and line on a malformed or repeated line.
RouteDump load_route_dump(const std::string& path);

struct RouteDiff {
    int64_t n_compared = 0;  // keys present in both dumps
    int64_t n_differ = 0;    // of those, how many chose a different set of ids
    int64_t n_missing = 0;   // keys present in only one dump
    RouteKey first_differ{-1, -1};  // smallest (layer, position) whose sets differ
};

// Compares the id sets (order ignored) line by line.
RouteDiff compare_routes(const RouteDump& ref, const RouteDump& test);

}  // namespace ds4::oracle
