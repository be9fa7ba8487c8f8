// The GPU executor's attention plans, without a GPU: operands read as views of a fused qkv
// buffer (the strides cuDNN gets), gradients written into their cat, and outputs held
// transposed (which readers take the layout). cuDNN itself runs in tests/gpu/run.sh.
#include <catch2/catch.hpp>

#include "codegen/cuda_exec.h"
#include "interpreter/passes.h"
#include "ir/fusion.h"
#include "ir/group.h"
#include "tests/support.h"

namespace tracer::test {

TEST_CASE("attention operands as views: q, k and v cut out of a fused qkv buffer get the strides cuDNN reads", "[codegen][cudnn]") {
  // The GPT's split (examples/gpt.trace): qkv [B, T, 3D] sliced, put into heads and transposed.
  // B=2, T=10, D=48 with 4 heads of 12; and a reshape of a transposed tensor, which would copy.
  SourceManager sm;
  interp::Interpreter in{sm};
  DiagnosticList diags;
  auto m = in.load("m.trace", R"(
def f(qkv: bf16[2, 10, 144], big: f32[4096, 1024]):
    q, k, v = split(qkv, 48, dim=2)
    q = transpose(reshape(q, (2, 10, 4, 12)), 1, 2)
    k = transpose(reshape(k, (2, 10, 4, 12)), 1, 2)
    v = transpose(reshape(v, (2, 10, 4, 12)), 1, 2)
    o = scaled_dot_product_attention(q, k, v, is_causal=True)
    w = reshape(transpose(qkv, 0, 1), (20, 144))
    return o, w.float() * 2.0, big * 2.0
)",
                   diags);
  REQUIRE(m);
  auto t = in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
  interp::Traces fused = interp::run_passes(in, {t}, {"fuse"}, {}, nullptr);
  const ir::Trace& tr = *fused[0];
  rt::cuda::DeviceTensor qkv;
  qkv.dtype = rt::DType::bf16;
  qkv.shape = {2, 10, 144};
  int views = 0, copies = 0;
  for (const ir::Stmt& s : tr.stmts) {
    if (s.kind != ir::StmtKind::Fusion) continue;
    for (const auto& o : s.outputs) {
      codegen::GpuExecutor::ViewChain chain;
      if (!codegen::GpuExecutor::layout_chain(s, o.get(), &chain)) continue;
      codegen::GpuExecutor::OperandView v;
      bool ok = codegen::GpuExecutor::apply_chain(chain, qkv, &v);
      INFO(ir::print_stmt_line(s) << " -> " << o->name);
      if (o->type.shape == rt::Shape{2, 4, 10, 12}) {
        REQUIRE(ok);
        ++views;
        // [b, h, s, d] over [B, T, 3D]: batch T*3D, head 12, position 3D, element 1.
        CHECK(v.strides == std::vector<int64_t>{1440, 12, 144, 1});
        CHECK((v.offset == 0 || v.offset == 48 || v.offset == 96));
      } else if (o->type.shape == rt::Shape{20, 144}) {
        CHECK_FALSE(ok);  // [T, B, 3D] read as [T*B, 3D] is no view of [B, T, 3D]
        ++copies;
      }
    }
  }
  CHECK(views == 3);
  CHECK(copies <= 1);
}

TEST_CASE("attention over views: the problem cuDNN gets has the views' strides and packed outputs of the true sizes", "[codegen][cudnn]") {
  // q, k, v as views of one [B=2, T=10, 3*4*12] buffer, heads of 12; the outputs packed over
  // b=2, h=4 (a problem built over b = h = 1 first gave the packed outputs a batch stride of
  // s*d instead of h*s*d: wrong outputs on the GPU for every batch after the first).
  using GE = codegen::GpuExecutor;
  auto view = [](rt::Shape shape, std::vector<int64_t> strides, int64_t offset) {
    GE::OperandView v;
    v.base.dtype = rt::DType::bf16;
    v.shape = std::move(shape);
    v.strides = std::move(strides);
    v.offset = offset;
    return v;
  };
  auto packed = [&](rt::Shape shape) {
    std::vector<int64_t> st(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;) st[d - 1] = st[d] * shape[d];
    return view(shape, st, 0);
  };
  const std::vector<int64_t> qkv_strides = {1440, 12, 144, 1};
  std::vector<GE::OperandView> fw = {view({2, 4, 10, 12}, qkv_strides, 0), view({2, 4, 10, 12}, qkv_strides, 48),
                                     view({2, 4, 10, 12}, qkv_strides, 96)};
  rt::cuda::AttentionProblem p;
  REQUIRE(GE::view_problem(fw, false, true, 0.25, &p));
  CHECK(p.b == 2);
  CHECK(p.h == 4);
  CHECK(p.s_q == 10);
  CHECK(p.s_kv == 10);
  CHECK(p.d == 12);
  CHECK(p.q == rt::cuda::AttentionProblem::Strides{1440, 12, 144, 1});
  CHECK(p.v == p.q);
  CHECK(p.o == rt::cuda::AttentionProblem::Strides{480, 120, 12, 1});
  CHECK(p.causal);
  // The backward: the output gradient [B, T, H, hd] put into heads, the saved output packed.
  std::vector<GE::OperandView> bw = {view({2, 4, 10, 12}, {480, 12, 48, 1}, 0), fw[0], fw[1], fw[2], packed({2, 4, 10, 12})};
  REQUIRE(GE::view_problem(bw, true, false, 0.25, &p));
  CHECK(p.dout == rt::cuda::AttentionProblem::Strides{480, 12, 48, 1});
  CHECK(p.o == rt::cuda::AttentionProblem::Strides{480, 120, 12, 1});
  CHECK(p.dq == rt::cuda::AttentionProblem::Strides{480, 120, 12, 1});
  CHECK(p.dk == p.dq);
  CHECK(p.dv == p.dq);
  // Rank 3 (one head) and rank 5 (batch dimensions that fold) fold into [b, h, s, d].
  std::vector<GE::OperandView> r3 = {packed({6, 10, 8}), packed({6, 7, 8}), packed({6, 7, 8})};
  REQUIRE(GE::view_problem(r3, false, false, 1.0, &p));
  CHECK(p.b * p.h == 6);
  CHECK(p.s_kv == 7);
  std::vector<GE::OperandView> r5 = {packed({2, 3, 4, 10, 8}), packed({2, 3, 4, 10, 8}), packed({2, 3, 4, 10, 8})};
  REQUIRE(GE::view_problem(r5, false, false, 1.0, &p));
  CHECK(p.b == 6);
  CHECK(p.h == 4);
  CHECK(p.o == rt::cuda::AttentionProblem::Strides{320, 80, 8, 1});
  // A head dimension that is not innermost is no problem cuDNN takes.
  std::vector<GE::OperandView> bad = {view({2, 4, 10, 12}, {480, 120, 1, 10}, 0), fw[1], fw[2]};
  CHECK_FALSE(GE::view_problem(bad, false, false, 1.0, &p));
}

// The qkv gradient written in place: the fusion after an attention backward that only puts dq, dk
// and dv back out of heads and concatenates them (then sums the bias gradient) gives cuDNN each
// gradient's strides into the cat, and leaves a fusion that reads the cat; one that reads a
// gradient otherwise (here a sum of dq's view as well) is left as it is.
TEST_CASE("attention gradients written into their cat: the strides and offsets cuDNN gets, and the fusion left", "[codegen][cudnn]") {
  for (bool extra : {false, true}) {
    SourceManager sm;
    interp::Interpreter in{sm};
    DiagnosticList diags;
    std::string src = R"(
def f(big: f32[4096, 1024], qkv: bf16[2, 10, 144], w: bf16[144, 48]):
    y = big * 2.0
    q, k, v = split(qkv, 48, dim=2)
    q = transpose(reshape(q, (2, 10, 4, 12)), 1, 2)
    k = transpose(reshape(k, (2, 10, 4, 12)), 1, 2)
    v = transpose(reshape(v, (2, 10, 4, 12)), 1, 2)
    o, lse = prims.attention(q, k, v, True, 0.25)
    dq, dk, dv = prims.attention_backward(o, q, k, v, o, lse, True, 0.25)
    a = reshape(transpose(dq, 1, 2), (2, 10, 48))
    b = reshape(transpose(dk, 1, 2), (2, 10, 48))
    c = reshape(transpose(dv, 1, 2), (2, 10, 48))
    g = prims.cat([a, b, c], 2)
    db = prims.sum(g, (0, 1))
)";
    // extra: the fusion also sums a view of dq itself, not through the cat.
    src += extra ? "    da = prims.sum(a, (0, 1))\n    return y, matmul(g, w), db, da\n" : "    return y, matmul(g, w), db\n";
    auto m = in.load("m.trace", src, diags);
    REQUIRE(m);
    auto t = in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
    interp::Traces fused = interp::run_passes(in, {t}, {"fuse"}, {}, nullptr);
    const ir::Trace& tr = *fused[0];
    const ir::Stmt* bw = nullptr;
    const ir::Stmt* next = nullptr;
    for (const ir::Stmt& s : tr.stmts) {
      if (bw && !next && s.kind != ir::StmtKind::Del) next = &s;
      if (s.kind == ir::StmtKind::Prim && s.op->name == "attention_backward") bw = &s;
    }
    REQUIRE(bw);
    REQUIRE(next);
    INFO(ir::print_stmt_line(*next));
    codegen::GpuExecutor::CatPlan cp = codegen::GpuExecutor::plan_cat(*bw, *next);
    if (extra) {
      CHECK(cp.cat == nullptr);
      continue;
    }
    REQUIRE(cp.cat != nullptr);
    CHECK(cp.cat_value->type.shape == rt::Shape{2, 10, 144});
    // dq [b, h, s, d] inside g [2, 10, 144]: batch 1440, head 12, position 144, element 1.
    for (int o = 0; o < 3; ++o) CHECK(cp.strides[o] == std::array<int64_t, 4>{1440, 12, 144, 1});
    CHECK(cp.offsets == std::vector<int64_t>{0, 48, 96});
    REQUIRE(cp.rest);  // the bias gradient, read from the cat
    REQUIRE(cp.rest->outputs.size() == 1);
    CHECK(cp.rest->outputs[0]->type.shape == rt::Shape{144});
    CHECK(ir::plan_group(*cp.rest).kind == ir::GroupKind::Columns);
    for (const ir::Stmt& p : cp.rest->subsymbols) CHECK(p.op->name != "cat");
  }
}

TEST_CASE("attention outputs held transposed: which readers take the layout (the GPT's forward and backward)", "[codegen][cudnn]") {
  // The small GPT under the recommended pipeline: a forward and a backward trace. Each
  // attention's output is read in the forward by the transpose that puts the heads back (perm
  // (0, 2, 1, 3)) and saved; in the backward by the same transpose (remat's) and the backward
  // attention as its saved output. Both traces' readers take the layout.
  SourceManager gsm;
  interp::Interpreter gin{gsm};
  interp::Traces traces = gpt_program(gin, {"grad", "remat", "fuse_reorder", "del_last_used"});
  REQUIRE(traces.size() == 2);
  const ir::Trace& fw = *traces[0];
  const ir::Trace& bw = *traces[1];
  auto fr = codegen::GpuExecutor::reader_map(fw);
  auto br = codegen::GpuExecutor::reader_map(bw);
  int outputs = 0;
  for (const ir::Stmt& st : fw.stmts) {
    if (st.kind != ir::StmtKind::Prim || st.op->name != "attention") continue;
    const ir::Proxy* y = st.outputs[0].get();
    std::vector<int64_t> perm;
    INFO(y->name);
    CHECK(codegen::GpuExecutor::readers_take(fr, y, &perm));
    CHECK(perm == std::vector<int64_t>{0, 2, 1, 3});
    bool saved = false;
    for (const auto& p : bw.inputs) saved = saved || p.get() == y;
    CHECK(saved);
    std::vector<int64_t> same = perm;
    CHECK(codegen::GpuExecutor::readers_take(br, y, &same));
    std::vector<int64_t> other = {0, 1, 2, 3};
    CHECK_FALSE(codegen::GpuExecutor::readers_take(br, y, &other));  // another layout: put back packed
    ++outputs;
  }
  CHECK(outputs == 2);
  // A reader that wants the value packed (an elementwise statement) refuses the layout, and so
  // does a permutation that moves the head dimension.
  SourceManager sm;
  interp::Interpreter in{sm};
  DiagnosticList diags;
  auto m = in.load("m.trace", R"(
def f(q: bf16[2, 4, 16, 8], k: bf16[2, 4, 16, 8], v: bf16[2, 4, 16, 8]):
    o, lse = prims.attention(q, k, v, True, 0.25)
    o2, lse2 = prims.attention(q, k, v, False, 0.25)
    return prims.transpose(o, (0, 2, 1, 3)), o * 2.0, prims.transpose(o2, (0, 1, 3, 2))
)", diags);
  REQUIRE(m);
  auto t = in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
  auto rm = codegen::GpuExecutor::reader_map(*t);
  int refused = 0;
  for (const ir::Stmt& st : t->stmts)
    if (st.kind == ir::StmtKind::Prim && st.op->name == "attention") {
      std::vector<int64_t> perm;
      CHECK_FALSE(codegen::GpuExecutor::readers_take(rm, st.outputs[0].get(), &perm));
      ++refused;
    }
  CHECK(refused == 2);
}

}  // namespace tracer::test
