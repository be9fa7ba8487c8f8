// Code generation of the optimizer's kernels (docs/codegen.md, "What a kernel looks like" and
// "Horizontal kernels"): one-element inputs read once before the loops, and independent
// elementwise groups as one horizontal kernel whose members of the same code share one segment
// function; NVRTC compiles each without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "codegen/cuda_codegen.h"
#include "codegen/nvrtc.h"
#include "interpreter/passes.h"
#include "tests/codegen_support.h"
#include "tests/support.h"

namespace tracer::test {

TEST_CASE("one-element inputs are read once before the loops, as float where only f32 math reads them", "[codegen][nvrtc]") {
  // An optimizer's coefficients: f64 scalars of f32 math over a bf16 parameter and its state, the
  // outputs written over the inputs. Loaded inside the element function they were loaded again
  // every iteration (a store may alias them), and held as doubles they took two registers each.
  auto ks = kernels_of(R"(
def f(p: bf16[70, 33], g: bf16[70, 33], lr: f64[()], wd: f64[()], s: f64[()], d: f64[70, 33], k: i64[()], V: f64[()]):
    q = p.float()
    u = q - lr * (g.float() + wd * q) * V
    e = d * s + k
    return u.to(bf16), e
)",
                       "f");
  REQUIRE(ks.size() == 2);
  std::string why;
  auto nvrtc = codegen::Nvrtc::load(&why);
  INFO(why);
  REQUIRE(nvrtc);
  for (const auto& k : ks) {
    INFO(k.source);
    // Every one-element input is read before the grid-stride loops, none inside the element function.
    CHECK(k.source.find("[0];") == std::string::npos);
    const std::string element = k.source.substr(k.source.find("_element("), k.source.find(") {", k.source.find("_element(")) - k.source.find("_element("));
    CHECK(element.find("p_") == std::string::npos);
    auto r = nvrtc->compile(k.source, k.name, "sm_90", codegen::Emit::cubin);
    INFO(r.log);
    CHECK(r.ok);
  }
  const std::string& a = ks[0].source.find("p_lr") != std::string::npos ? ks[0].source : ks[1].source;
  const std::string& b = ks[0].source.find("p_lr") != std::string::npos ? ks[1].source : ks[0].source;
  INFO(a);
  // f32 math only: converted once, where read, and passed by value.
  // (under names of their own in the kernel: an input named V is not the vector width)
  CHECK_THAT(a, Catch::Contains("  const float tr_s_lr = (float)(p_lr[0]);\n"));
  CHECK_THAT(a, Catch::Contains("  const float tr_s_wd = (float)(p_wd[0]);\n"));
  CHECK_THAT(a, Catch::Contains("  const float tr_s_V = (float)(p_V[0]);\n"));
  CHECK_THAT(a, Catch::Contains(", const float wd, const float lr, const float V, float& out_"));
  CHECK_THAT(a, Catch::Contains(", tr_s_wd, tr_s_lr, tr_s_V, out_"));
  CHECK(a.find("const float tr_s_lr = (float)(p_lr[0]);") < a.find("for (int v = first; v < nvec; v += stride)"));
  INFO(b);
  // f64 math keeps the double, and the integer stays an integer.
  CHECK_THAT(b, Catch::Contains("  const double tr_s_s = (p_s[0]);\n"));
  CHECK_THAT(b, Catch::Contains(", const double s"));
  CHECK_THAT(b, Catch::Contains("  const long long tr_s_v_k = ((long long)p_v_k[0]);\n"));
  CHECK_THAT(b, Catch::Contains(", const double s, const long long v_k, double& out_e)"));
}

TEST_CASE("horizontal kernels: independent elementwise groups as one kernel that NVRTC compiles", "[codegen][nvrtc]") {
  std::string why;
  auto nvrtc = codegen::Nvrtc::load(&why);
  INFO(why);
  REQUIRE(nvrtc);
  // The groups the executor would run one after the other (the slices of k are their own).
  SourceManager sm;
  interp::Interpreter in{sm};
  DiagnosticList diags;
  auto m = in.load("m.trace", R"(
def f(a: bf16[13, 19], ga: bf16[13, 19], b: f32[7], gb: f32[7], c: bf16[3], gc: bf16[3], d: f32[4096, 9], gd: f32[4096, 9], k: f32[4096, 9]):
    na = prims.convert_element_type(prims.sub(prims.convert_element_type(a, float32), prims.mul(0.01, prims.convert_element_type(ga, float32))), bfloat16)
    nb = prims.sub(prims.mul(b, 0.999), prims.mul(0.01, gb))
    nc = prims.convert_element_type(prims.sub(prims.convert_element_type(c, float32), prims.mul(0.01, prims.convert_element_type(gc, float32))), bfloat16)
    nd = prims.sub(d, prims.mul(k, prims.sqrt(prims.abs(gd))))
    return na, nb, nc, nd
)",
                   diags);
  REQUIRE(m);
  auto t = in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
  // fuse makes one group per shape: four, independent, as an optimizer's trace has them.
  interp::Traces fused = interp::run_passes(in, {t}, {"fuse"}, {}, nullptr);
  std::vector<ir::Stmt> groups;
  for (const ir::Stmt& s : fused[0]->stmts)
    if (s.kind == ir::StmtKind::Fusion) groups.push_back(s);
  REQUIRE(groups.size() == 4);
  std::vector<const ir::Stmt*> members;
  for (const auto& g : groups) members.push_back(&g);
  std::vector<std::unordered_set<const ir::Proxy*>> alias(members.size());
  codegen::Kernel k = codegen::generate_elementwise_multi(members, "h", alias, 132);
  REQUIRE(k.segment_params.size() == members.size());
  size_t params = 0;
  for (int n : k.segment_params) params += static_cast<size_t>(n);
  CHECK(params == k.params.size());
  int64_t blocks = 0;
  for (int64_t b : k.segment_blocks) blocks += b;
  CHECK(blocks == k.blocks);
  for (size_t j = 0; j < members.size(); ++j)  // a block of 256 threads per 256 vectors (or fewer)
    CHECK(k.segment_blocks[j] == std::max<int64_t>(1, (k.segment_elements[j] / 4 + k.segment_elements[j] % 4 + 255) / 256));
  std::vector<int64_t> sizes(k.segment_elements.begin(), k.segment_elements.end());
  std::sort(sizes.begin(), sizes.end());
  CHECK(sizes == std::vector<int64_t>{3, 7, 13 * 19, 4096 * 9});
  size_t kernels = 0;
  for (size_t at = k.source.find("__global__"); at != std::string::npos; at = k.source.find("__global__", at + 1)) ++kernels;
  CHECK(kernels == 1);
  // One argument: the pointers, then a mask word each 64 members, read in place by index.
  CHECK_THAT(k.source, Catch::Contains("struct h_args {\n  unsigned long long p[" + std::to_string(params) + "];\n  unsigned long long vec_mask[1];\n};"));
  CHECK_THAT(k.source, Catch::Contains("extern \"C\" __global__ void __launch_bounds__(256) h(const TR_GRID_CONSTANT h_args a) {"));
  // Members of the same code share a segment function: a and c (bf16, nothing indexed by rows
  // and columns, so their shapes do not matter), b and d each their own.
  CHECK(k.segment_kinds == 3);
  CHECK_THAT(k.source, Catch::Contains("__constant__ unsigned h_start[5] = {0u, "));
  CHECK_THAT(k.source, Catch::Contains("__constant__ unsigned short h_kind[4] = {"));
  REQUIRE(k.segment_kind.size() == 4);
  CHECK(std::set<int>(k.segment_kind.begin(), k.segment_kind.end()).size() == 3);
  CHECK(k.source.find("case 3:") == std::string::npos);
  CHECK(k.symbol.rfind("tr_", 0) == 0);
  INFO(k.source);
  auto r = nvrtc->compile(k.source, k.name, "sm_90", codegen::Emit::cubin);
  INFO(r.log);
  CHECK(r.ok);
  auto c = nvrtc->compile(k.structure, k.symbol, "sm_90", codegen::Emit::cubin);
  CHECK(c.ok);
  // (and for the oldest GPUs NVRTC 13 targets)
  CHECK(nvrtc->compile(k.source, k.name, "sm_75", codegen::Emit::cubin).ok);
  // 65 members of one code: one segment function, called from one place; two mask words.
  std::vector<const ir::Stmt*> many(65, members[0]);
  codegen::Kernel k65 = codegen::generate_elementwise_multi(many, "h", std::vector<std::unordered_set<const ir::Proxy*>>(65), 132);
  CHECK(k65.segment_kinds == 1);
  CHECK_THAT(k65.source, Catch::Contains("unsigned long long vec_mask[2];"));
  CHECK_THAT(k65.source, Catch::Contains("const int vec_ok = (int)((a.vec_mask[lo >> 6] >> (lo & 63)) & 1ULL);"));
  size_t calls = 0;
  for (size_t at = k65.source.find("      h_k0("); at != std::string::npos; at = k65.source.find("      h_k0(", at + 1)) ++calls;
  CHECK(calls == 1);
  CHECK(k65.source.find("h_k1") == std::string::npos);
  // The member's pointers are read by index from its first one (k65's member j at j * n).
  const int n0 = k65.segment_params[0];
  CHECK_THAT(k65.source, Catch::Contains("__constant__ unsigned h_base[65] = {0u, " + std::to_string(n0) + "u, " + std::to_string(2 * n0) + "u, "));
  CHECK_THAT(k65.source, Catch::Contains("a.p[base + " + std::to_string(n0 - 1) + "]"));
  auto r65 = nvrtc->compile(k65.source, k65.name, "sm_90", codegen::Emit::cubin);
  INFO(r65.log);
  CHECK(r65.ok);
  // More than 512 members, or a count of may_alias sets that differs, is refused.
  std::vector<const ir::Stmt*> too_many(513, members[0]);
  CHECK_THROWS_AS(codegen::generate_elementwise_multi(too_many, "h", std::vector<std::unordered_set<const ir::Proxy*>>(513), 132),
                  std::invalid_argument);
  CHECK_THROWS_AS(codegen::generate_elementwise_multi(members, "h", {}, 132), std::invalid_argument);
}

}  // namespace tracer::test
