// Index expressions of the generated kernels (codegen/cuda_codegen_detail.h, detail::Index):
// those written over a row kernel's row and column are evaluated against the flat ones.
#include <catch2/catch.hpp>

#include <cctype>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/cuda_codegen_detail.h"
#include "ir/group.h"

namespace tracer::test {

namespace {
// A tiny evaluator of the index expressions codegen writes: integers with an optional LL suffix,
// the names i, tr_r and tr_c, casts to (long long) and (int), + - * / % and parentheses (C's
// precedence and truncating division; every value here is non-negative).
struct IndexEval {
  const std::string& s;
  size_t at = 0;
  long long i, r, c;
  void ws() {
    while (at < s.size() && s[at] == ' ') ++at;
  }
  bool eat(const std::string& t) {
    ws();
    if (s.compare(at, t.size(), t) != 0) return false;
    at += t.size();
    return true;
  }
  long long primary() {
    ws();
    if (eat("(long long)")) return primary();
    if (eat("(int)")) return static_cast<int>(primary());
    if (eat("(")) {
      long long v = sum();
      REQUIRE(eat(")"));
      return v;
    }
    if (eat("tr_r")) return r;
    if (eat("tr_c")) return c;
    if (eat("i")) return i;
    REQUIRE(at < s.size());
    REQUIRE(std::isdigit(static_cast<unsigned char>(s[at])));
    long long v = 0;
    while (at < s.size() && std::isdigit(static_cast<unsigned char>(s[at]))) v = v * 10 + (s[at++] - '0');
    eat("LL");
    return v;
  }
  long long product() {
    long long v = primary();
    for (;;) {
      if (eat("*")) v *= primary();
      else if (eat("/")) v /= primary();
      else if (eat("%")) v %= primary();
      else return v;
    }
  }
  long long sum() {
    long long v = product();
    for (;;) {
      if (eat("+")) v += product();
      else if (eat("-")) v -= product();
      else return v;
    }
  }
  long long value() {
    long long v = sum();
    ws();
    REQUIRE(at == s.size());
    return v;
  }
};
long long eval_index(const std::string& e, long long i, long long r, long long c) {
  IndexEval ev{e, 0, i, r, c};
  return ev.value();
}
}  // namespace

TEST_CASE("row kernels' index expressions over the row and the column equal the flat index's", "[codegen]") {
  using tracer::codegen::detail::Index;
  using tracer::codegen::detail::index_coord;
  using tracer::codegen::detail::offset_expr;
  using tracer::codegen::detail::view_offset_expr;
  // Every (div, mod) split of a few row lengths, and ones that cross the row boundary.
  for (long long C : {1LL, 6LL, 12LL, 50304LL, 3LL << 31}) {
    Index ix("LL", C, 1024);
    for (long long div : {1LL, 2LL, 3LL, 4LL, 5LL, 6LL, 12LL, 24LL, 36LL, 7LL, 100608LL})
      for (long long mod : {0LL, 1LL, 2LL, 3LL, 4LL, 5LL, 8LL, 16LL}) {
        std::string flat = index_coord(div, mod, Index("LL")), split = index_coord(div, mod, ix);
        for (long long r : {0LL, 1LL, 2LL, 5LL, 17LL, 1023LL})  // below the 1024 rows
          for (long long c : {0LL, 1LL, C / 2, C - 1}) {
            if (c >= C) continue;  // a column is below the row's length
            long long i = r * C + c;
            INFO("C " << C << " div " << div << " mod " << mod << " r " << r << " c " << c << ": " << split);
            CHECK(eval_index(split, i, r, c) == eval_index(flat, i, r, c));
          }
      }
  }
  // Broadcast inputs of a row kernel's shape (the GPT's position table, a norm's weight, a
  // per-row target), and views of a fused buffer: the offsets agree at every element.
  tracer::ir::Shape S{2, 3, 12};
  Index ix("LL", 12, 6);
  for (const tracer::ir::Shape& in : std::vector<tracer::ir::Shape>{{12}, {3, 12}, {2, 3, 1}, {2, 1, 12}, {1, 3, 1}, {3, 1}}) {
    std::string flat = offset_expr(in, S, "LL"), split = offset_expr(in, S, ix);
    for (long long i = 0; i < 72; ++i) CHECK(eval_index(split, i, i / 12, i % 12) == eval_index(flat, i, i / 12, i % 12));
  }
  // A [2, 3, 12] group reading a slice of a [2, 3, 36] buffer (q of a fused qkv), a transpose of a
  // [2, 12, 3] one, and a view whose last dimension is two sub-dimensions (a merge of heads).
  using tracer::ir::SubDim;
  tracer::ir::View slice{nullptr, {2, 3, 12}, {{SubDim{2, 108}}, {SubDim{3, 36}}, {SubDim{12, 1}}}, 12};
  tracer::ir::View transposed{nullptr, {2, 3, 12}, {{SubDim{2, 36}}, {SubDim{3, 1}}, {SubDim{12, 3}}}, 0};
  tracer::ir::View merged{nullptr, {2, 3, 12}, {{SubDim{2, 36}}, {SubDim{3, 12}}, {SubDim{2, 1}, SubDim{6, 2}}}, 5};
  for (const tracer::ir::View& v : {slice, transposed, merged}) {
    std::string flat = view_offset_expr(v, S, "LL"), split = view_offset_expr(v, S, ix);
    for (long long i = 0; i < 72; ++i) CHECK(eval_index(split, i, i / 12, i % 12) == eval_index(flat, i, i / 12, i % 12));
  }
}

// view_runs (column kernels' vector path) against the kernel's own scalar expression: wherever it
// says a view reads runs, the offsets of elements i .. i + V - 1 (V dividing i) are consecutive
// and start at a multiple of V; random views with sub-dimensions, broadcasts, offsets and cat
// pieces, and the transposed attention gradient a qkv bias gradient reads.
TEST_CASE("view_runs holds only where the view's offsets run in steps of one", "[codegen]") {
  using tracer::codegen::detail::view_offset_expr;
  using tracer::codegen::detail::view_runs;
  using tracer::ir::SubDim;
  using tracer::ir::View;
  std::mt19937 rng(12345);
  auto pick = [&](std::vector<int64_t> xs) { return xs[rng() % xs.size()]; };
  const tracer::ir::Shape S{2, 4, 16};
  int said = 0, could = 0;
  for (int n = 0; n < 3000; ++n) {
    View v;
    v.shape = S;
    for (int64_t size : S) {
      std::vector<SubDim> dims;
      if (size == 16 && rng() % 2) {  // a merged dimension: two sub-dimensions
        int64_t outer = pick({2, 4, 8});
        dims.push_back({outer, pick({0, 1, 8, 16, 64, 96})});
        dims.push_back({16 / outer, pick({1, 1, 2, 32})});
      } else {
        dims.push_back({size, pick({0, 1, 2, 3, 8, 16, 64, 128})});
      }
      v.dims.push_back(dims);
    }
    v.offset = pick({0, 0, 3, 8, 16, 24});
    const int64_t V = pick({2, 4, 8});
    const int64_t dim = pick({-1, -1, 1, 2});
    const int64_t shift = dim == 2 ? pick({0, 8, 4, 6}) : dim == 1 ? pick({0, 1, 2}) : 0;
    const std::string e = view_offset_expr(v, S, "LL", dim, shift);
    bool runs = true;
    for (long long i = 0; i + V <= 128 && runs; i += V) {
      const long long coord = dim < 0 ? 0 : dim == 2 ? i % 16 : (i / 16) % 4;
      if (coord < shift) continue;  // not in this piece
      const long long base = eval_index(e, i, 0, 0);
      runs = base % V == 0;
      for (long long k = 1; k < V && runs; ++k) runs = eval_index(e, i + k, 0, 0) == base + k;
    }
    could += runs;
    const bool says = view_runs(v, S, V, dim, shift);
    said += says;
    INFO("view " << n << " V " << V << " dim " << dim << " shift " << shift << ": " << e);
    if (says) CHECK(runs);
  }
  INFO("said " << said << " could " << could);
  CHECK(said > 100);  // the check above is not vacuous
  CHECK(said <= could);
  // The GPT's qkv bias gradient: dq [8, 12, 1024, 64] transposed and merged into [8, 1024, 768].
  const tracer::ir::Shape G{8, 1024, 768};
  View dq{nullptr, G, {{SubDim{8, 786432}}, {SubDim{1024, 64}}, {SubDim{12, 65536}, SubDim{64, 1}}}, 0};
  CHECK(view_runs(dq, G, 8));
  CHECK(view_runs(dq, G, 8, 2, 768));
  CHECK_FALSE(view_runs(dq, G, 8, 2, 764));  // a piece starting inside a run
  View heads_last{nullptr, G, {{SubDim{8, 786432}}, {SubDim{1024, 1}}, {SubDim{768, 1024}}}, 0};
  CHECK_FALSE(view_runs(heads_last, G, 8));  // the columns are 1024 elements apart
}

}  // namespace tracer::test
