// Minimum s-t cut, for the remat pass (Boost.Graph's push-relabel max-flow).
#pragma once
#include <cstdint>
#include <tuple>
#include <vector>

namespace tracer::interp {

// Nodes 0..n-1; edges (from, to, capacity >= 0). Returns, for each node, whether it is on the
// source side of a minimum cut (reachable from source in the residual graph of a maximum flow).
std::vector<bool> min_cut_source_side(int n, const std::vector<std::tuple<int, int, int64_t>>& edges, int source,
                                      int sink, int64_t* cut_capacity);

}  // namespace tracer::interp
