// Minimum cuts through Boost.Graph: push-relabel max-flow, then the residual graph's source side.
#include "interpreter/mincut.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <algorithm>
#include <cstdint>
#include <deque>

namespace tracer::interp {

namespace {

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using Graph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<boost::edge_capacity_t, int64_t,
                    boost::property<boost::edge_residual_capacity_t, int64_t,
                                    boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
using Edge = Traits::edge_descriptor;

}  // namespace

std::vector<bool> min_cut_source_side(int n, const std::vector<std::tuple<int, int, int64_t>>& edges, int source,
                                      int sink, int64_t* cut_capacity) {
  Graph g(static_cast<size_t>(n));
  auto cap = boost::get(boost::edge_capacity, g);
  auto rev = boost::get(boost::edge_reverse, g);
  auto res = boost::get(boost::edge_residual_capacity, g);
  // No flow exceeds what leaves the source or what enters the sink, so a capacity above the
  // smaller of the two is never cut: it is clamped to it plus one. Push-relabel's sums stay
  // below the sum of all capacities; when that would overflow 64 bits (a large model's bytes
  // with "infinite" edges), every capacity is divided by the factor that keeps it below 2^61 (a
  // nonzero one stays at least 1): the cut is then minimal to within that rounding.
  __int128 out_of_source = 0, into_sink = 0;
  for (const auto& [u, v, c] : edges) {
    if (u == source) out_of_source += c;
    if (v == sink) into_sink += c;
  }
  const __int128 bound = (out_of_source < into_sink ? out_of_source : into_sink) + 1;
  __int128 total = 0;
  for (const auto& e : edges) total += std::min<__int128>(std::get<2>(e), bound);
  const __int128 limit = static_cast<__int128>(1) << 61;
  const __int128 divide = total >= limit ? total / limit + 1 : 1;
  auto capacity = [&](int64_t c) -> int64_t {
    __int128 x = std::min<__int128>(c, bound);
    if (divide > 1 && x > 0) x = std::max<__int128>(1, x / divide);
    return static_cast<int64_t>(x);
  };
  for (const auto& [u, v, c] : edges) {
    Edge e = boost::add_edge(static_cast<size_t>(u), static_cast<size_t>(v), g).first;
    Edge r = boost::add_edge(static_cast<size_t>(v), static_cast<size_t>(u), g).first;
    cap[e] = capacity(c);
    cap[r] = 0;
    rev[e] = r;
    rev[r] = e;
  }
  int64_t flow = boost::push_relabel_max_flow(g, static_cast<size_t>(source), static_cast<size_t>(sink));
  if (cut_capacity) *cut_capacity = static_cast<int64_t>(std::min<__int128>(static_cast<__int128>(flow) * divide, INT64_MAX));
  std::vector<bool> side(static_cast<size_t>(n), false);
  std::deque<size_t> queue{static_cast<size_t>(source)};
  side[static_cast<size_t>(source)] = true;
  while (!queue.empty()) {
    size_t u = queue.front();
    queue.pop_front();
    for (auto [it, end] = boost::out_edges(u, g); it != end; ++it) {
      size_t v = boost::target(*it, g);
      if (!side[v] && res[*it] > 0) {
        side[v] = true;
        queue.push_back(v);
      }
    }
  }
  return side;
}

}  // namespace tracer::interp
