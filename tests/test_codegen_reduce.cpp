// Reduction, broadcast, column and row kernels: what they generate (how they accumulate, how
// they read views and cats, where they vectorize) and that NVRTC compiles them. The GPU tests
// (tests/gpu/ops.trace) check their numbers against the CPU.
#include <catch2/catch.hpp>

#include "codegen/cuda_codegen.h"
#include "codegen/cuda_codegen_detail.h"
#include "codegen/cuda_reduce.h"
#include "codegen/nvrtc.h"
#include "interpreter/passes.h"
#include "ir/fusion.h"
#include "ir/group.h"
#include "ir/verify.h"
#include "runtime/kernels.h"
#include "tests/codegen_support.h"
#include "tests/support.h"

namespace tracer::test {

TEST_CASE("reduction and broadcast kernels generate and compile, non-contiguous reductions through strides", "[codegen][nvrtc]") {
  SourceManager sm;
  interp::Interpreter in{sm};
  DiagnosticList diags;
  auto m = in.load("m.trace", R"(
def f(x: bf16[8, 16, 4], y: f64[6, 5], z: i32[7, 3], q: f32[65536, 4], w: bf16[1, 1048576]):
    a = prims.sum(x, (1,))
    b = prims.amax(x, (2,))
    c = prims.sum(y, (0, 1))
    d = prims.amin(z, (0,))
    e = prims.prod(y, (1,), keepdim=True)
    g = prims.broadcast_in_dim(a, (8, 3, 4), (0, 2))
    h = prims.sum(x, (0, 2))
    u = prims.sum(q, (0,))
    v = prims.amax(w, (1,))
    n = prims.sum(x, -1)
    return a, b, c, d, e, g, h, u, v, n
)", diags);
  REQUIRE(m);
  auto t = in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
  std::string why;
  auto nvrtc = codegen::Nvrtc::load(&why);
  REQUIRE(nvrtc);
  int made = 0;
  for (const ir::Stmt& s : t->stmts) {
    codegen::SimpleKernel k;
    std::string no;
    bool ok = s.op->name == "broadcast_in_dim" ? codegen::generate_broadcast(s, &k, &no) : codegen::generate_reduction(s, &k, &no);
    INFO(ir::print_stmt_line(s) << ": " << no);
    REQUIRE(ok);
    if (s.outputs[0]->name == "h") {  // dims 0 and 2 are not contiguous: one thread per output
      INFO(k.source);
      CHECK_THAT(k.source, Catch::Contains("(not contiguous)"));
      // x is [8, 16, 4]: the kept dimension 1 has stride 4; the reduced ones 64 and 1.
      CHECK_THAT(k.source, Catch::Contains("const long long base = o * 4LL;"));
      CHECK_THAT(k.source, Catch::Contains("x[base + (r % 4LL) * 1LL + (r / 4LL) * 64LL]"));
      CHECK(k.threads == 16);
    }
    ++made;
    CHECK(k.symbol.rfind("tr_", 0) == 0);
    // Long reductions with few outputs split into chunks and combine them in a second kernel.
    bool long_one = s.outputs[0]->name == "u" || s.outputs[0]->name == "v";
    CHECK(k.symbol2.empty() != long_one);
    if (long_one) {
      CHECK(k.partials > 4);
      CHECK_THAT(k.source, Catch::Contains(k.symbol2 + "("));
    }
    auto r = nvrtc->compile(k.source, k.symbol, "sm_90", codegen::Emit::cubin);
    INFO(r.log);
    CHECK(r.ok);
  }
  CHECK(made == 10);
  // Edge cases refused up front (the CPU path reports or handles them), never a crash.
  auto m2 = in.load("m2.trace", R"(
def g(e: f32[0, 5], z: f32[3, 0]):
    return prims.sum(e, (1,)), prims.sum(z, (0,)), prims.amax(z, (1,))
)", diags);
  REQUIRE(m2);
  auto t2 = in.trace(*m2->globals.at("g").as<interp::FunctionObj>(), {});
  std::vector<std::string> reasons;
  for (const ir::Stmt& s : t2->stmts) {
    codegen::SimpleKernel k;
    std::string no;
    CHECK_FALSE(codegen::generate_reduction(s, &k, &no));
    reasons.push_back(no);
  }
  REQUIRE(reasons.size() == 3);
  CHECK(reasons[0] == "the output is empty");
  CHECK(reasons[1] == "the output is empty");
  CHECK_THAT(reasons[2], Catch::Contains("empty max or min"));
}

TEST_CASE("column kernels read 16 bytes a thread where the row length allows, and compile", "[codegen][nvrtc]") {
  std::string why;
  auto nvrtc = codegen::Nvrtc::load(&why);
  INFO(why);
  REQUIRE(nvrtc);
  // A bias gradient fused with the elementwise value it sums (and writes): bf16 rows of 40 (8
  // columns a thread, 5 threads a row), f32 rows of 12 (4 a thread), rows of 7 (not a multiple:
  // one a thread), and a sum over two leading dimensions.
  struct Case {
    std::string src;
    int width;
  };
  for (const Case& c : std::vector<Case>{
           {"def f(x: bf16[96, 40], y: bf16[96, 40], big: f32[4096, 64]):\n    g = x * y\n    return g, prims.sum(g, (0,)), big * 2.0\n", 8},
           {"def f(x: f32[33, 12], y: f32[33, 12], big: f32[4096, 64]):\n    g = x * y\n    return g, prims.sum(g, (0,)), big * 2.0\n", 4},
           {"def f(x: bf16[50, 7], y: bf16[50, 7], big: f32[4096, 64]):\n    g = x * y\n    return g, prims.sum(g, (0,)), big * 2.0\n", 1},
           {"def f(x: bf16[3, 5, 24], y: bf16[3, 5, 24], big: f32[4096, 64]):\n    g = x + y\n    return g, prims.sum(g, (0, 1)), big * 2.0\n", 8}}) {
    auto ks = kernels_of(c.src, "f");
    const codegen::Kernel* col = nullptr;
    for (const auto& k : ks)
      if (k.columns) col = &k;
    INFO(c.src);
    REQUIRE(col);
    CHECK(col->vector_width == c.width);
    // Every thread's columns: whole blocks of 32 threads or more, dividing the columns evenly
    // where they can.
    CHECK(col->column_block >= 32);
    if (c.width > 1) {
      CHECK_THAT(col->source, Catch::Contains("if (vec_ok) {"));
      CHECK_THAT(col->source, Catch::Contains("tr_copy<" + std::to_string(c.width) + " * sizeof("));
    }
    auto r = nvrtc->compile(col->source, col->name, "sm_90", codegen::Emit::cubin);
    INFO(r.log);
    CHECK(r.ok);
  }
}

// A qkv bias gradient over the attention gradients put back out of heads (transpose, merge, cat):
// the vector path reads each piece 8 bf16 at a time, marks the pieces' bases for the launcher's
// alignment check, and compiles. A transpose that moves the columns (a stride other than one)
// keeps one element at a time.
TEST_CASE("column kernels read views and cats of views in runs of 16 bytes where the offsets allow", "[codegen][nvrtc]") {
  std::string why;
  auto nvrtc = codegen::Nvrtc::load(&why);
  INFO(why);
  REQUIRE(nvrtc);
  const std::string heads =
      "def f(big: f32[4096, 64], dq: bf16[2, 3, 10, 16], dk: bf16[2, 3, 10, 16], dv: bf16[2, 3, 10, 16], w: bf16[144, 8]):\n"
      "    y = big * 2.0\n"
      "    a = prims.reshape(prims.transpose(dq, (0, 2, 1, 3)), (2, 10, 48))\n"
      "    b = prims.reshape(prims.transpose(dk, (0, 2, 1, 3)), (2, 10, 48))\n"
      "    c = prims.reshape(prims.transpose(dv, (0, 2, 1, 3)), (2, 10, 48))\n"
      "    g = prims.cat([a, b, c], 2)\n"
      "    db = prims.sum(g, (0, 1))\n"
      "    return y, prims.matmul(g, w), db\n";
  const std::string moved =
      "def f(x: bf16[2, 48, 10], y: bf16[2, 10, 48], big: f32[4096, 64]):\n"
      "    g = prims.transpose(x, (0, 2, 1)) + y\n"
      "    return g, prims.sum(g, (0, 1)), big * 2.0\n";
  for (const std::string& src : {heads, moved}) {
    auto ks = kernels_of(src, "f");
    const codegen::Kernel* col = nullptr;
    for (const auto& k : ks)
      if (k.columns) col = &k;
    INFO(src);
    REQUIRE(col);
    CHECK(col->vector_width == 8);
    int marked = 0;
    for (const auto& p : col->params) marked += p.vector;
    if (src == heads) {
      CHECK(marked == 3);
      CHECK_THAT(col->source, Catch::Contains("tr_src = tr_cc < 48LL ? p_dq + ("));
      CHECK_THAT(col->source, Catch::Contains(": p_dv + ("));
      CHECK_THAT(col->source, Catch::Contains("tr_copy<8 * sizeof(tr_bf16)>(g_b[tr_u], tr_src);"));
    } else {
      CHECK(marked == 0);
      CHECK_THAT(col->source, !Catch::Contains("_b[tr_u], p_x + ("));
    }
    auto r = nvrtc->compile(col->source, col->name, "sm_90", codegen::Emit::cubin);
    INFO(r.log);
    CHECK(r.ok);
  }
}

// How column and row kernels accumulate: f32 values reduce in f32 over a batch of rows (columns)
// or a vector (rows) before one double operation; f64 values never pass through f32. A column
// kernel whose output may be written over its input issues a batch's loads before computing any
// of its rows (a second loop over the batch), one that aliases nothing keeps one loop.
TEST_CASE("column and row kernels reduce f32 in f32 batches, f64 in double, and batch loads where outputs alias", "[codegen][nvrtc]") {
  std::string why;
  auto nvrtc = codegen::Nvrtc::load(&why);
  INFO(why);
  REQUIRE(nvrtc);
  auto fused_trace = [](const std::string& source) {
    SourceManager sm;
    interp::Interpreter in{sm};
    DiagnosticList diags;
    auto m = in.load("m.trace", source, diags);
    REQUIRE(m);
    auto t = in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
    return interp::run_passes(in, {t}, {"fuse"}, {}, nullptr)[0];
  };
  for (const std::string dt : {"f32", "bf16", "f64"}) {
    INFO(dt);
    const bool narrow = dt != "f64";
    auto t = fused_trace("def f(x: " + dt + "[300, 64], y: " + dt + "[300, 64]):\n    g = x * y + 1.0\n    return prims.sum(g, (0,)), prims.amax(g, (0,))\n");
    const ir::Stmt* col = nullptr;
    for (const auto& s : t->stmts)
      if (codegen::is_column_group(s)) col = &s;
    REQUIRE(col);
    codegen::Kernel plain = codegen::generate_columns(*col, "k");
    CHECK((plain.source.find("float tr_p0[") != std::string::npos) == narrow);
    CHECK((plain.source.find("float tr_p1[") != std::string::npos) == narrow);
    auto count = [](const std::string& s, const std::string& what) {
      size_t n = 0;
      for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
      return n;
    };
    // The vector path's batch loop and the scalar path's: one each where nothing aliases.
    if (plain.vector_width > 1) CHECK(count(plain.source, "for (int tr_u = 0;") == 2);
    auto r = nvrtc->compile(plain.source, plain.name, "sm_90", codegen::Emit::cubin);
    INFO(r.log);
    CHECK(r.ok);

    auto row_kernel = [&](const std::string& body) {
      auto rows = fused_trace("def f(x: " + dt + "[16, 5000]):\n    return " + body + "\n");
      const ir::Stmt* row = nullptr;
      for (const auto& s : rows->stmts)
        if (codegen::is_row_group(s)) row = &s;
      REQUIRE(row);
      codegen::Kernel rk = codegen::generate_row(*row, "r", {}, 48 * 1024);
      auto rr = nvrtc->compile(rk.source, rk.name, "sm_90", codegen::Emit::cubin);
      INFO(rr.log);
      CHECK(rr.ok);
      return rk.source;
    };
    // A row's sum and maximum: f32 batches of a vector's elements.
    std::string plain_rows = row_kernel("ltorch.sum(x * 2.0, 1, keepdim=True), ltorch.amax(x * 2.0, 1, keepdim=True)");
    CHECK((plain_rows.find("float tr_vp0 = ") != std::string::npos) == narrow);
    CHECK((plain_rows.find("float tr_vp1 = ") != std::string::npos) == narrow);
    // A logsumexp over rows of 5000 (online, f32 values): its amax is the online sum's running
    // maximum, not accumulated apart; f64 values take two passes in double.
    std::string lse = row_kernel("ltorch.logsumexp(x, 1, keepdim=True)");
    CHECK((lse.find("running maximum of reduction 1's online sum") != std::string::npos) == narrow);
    CHECK((lse.find("mx = tr_max_nan(mx, ") != std::string::npos) == narrow);
    CHECK(lse.find("float tr_vp0 = ") == std::string::npos);
  }
  // An output written over its input: the loads of the batch in a loop of their own.
  auto t = fused_trace("def f(x: bf16[300, 64], y: bf16[300, 64]):\n    g = x * y\n    return g, prims.sum(g, (0,))\n");
  const ir::Stmt* col = nullptr;
  for (const auto& s : t->stmts)
    if (codegen::is_column_group(s)) col = &s;
  REQUIRE(col);
  std::unordered_set<const ir::Proxy*> alias;
  for (const auto& a : col->args) ir::for_each_proxy(a, [&](const ir::ProxyPtr& p) { alias.insert(p.get()); });
  codegen::Kernel aliased = codegen::generate_columns(*col, "k", alias);
  codegen::Kernel apart = codegen::generate_columns(*col, "k");
  REQUIRE(aliased.vector_width == 8);
  size_t n_alias = 0, n_apart = 0;
  for (size_t at = aliased.source.find("for (int tr_u = 0;"); at != std::string::npos; at = aliased.source.find("for (int tr_u = 0;", at + 1)) ++n_alias;
  for (size_t at = apart.source.find("for (int tr_u = 0;"); at != std::string::npos; at = apart.source.find("for (int tr_u = 0;", at + 1)) ++n_apart;
  CHECK(n_alias == 3);
  CHECK(n_apart == 2);
  auto r = nvrtc->compile(aliased.source, aliased.name, "sm_90", codegen::Emit::cubin);
  INFO(r.log);
  CHECK(r.ok);
}

// A reduction of every dimension (a loss) is a column group of one column: it joins its
// elementwise producers (one kernel reads o, nothing of the product is written), and the kernel
// folds the column into rows of the widest divisor up to 2048 (a multiple of 8 where one of at
// least 256 divides: 16-byte accesses). On the CPU the fused program gives the unfused one's
// numbers bit for bit (both add in double, in order), also where a value computed after the
// reduction reads one the rows computed from the inputs alone (p + q).
TEST_CASE("reductions of every dimension join their producers and fold their one column", "[codegen][nvrtc]") {
  const std::string src =
      "def f(o: bf16[4, 16, 64, 32], x: f32[7, 1001], y: f32[5000], p: f32[1], q: f32[1]):\n"
      "    a = sum(o.float() * o.float())\n"
      "    b = prims.amax(x * 2.0, (0, 1))\n"
      "    c = prims.convert_element_type(prims.add(prims.reshape(prims.add(p, q), ()), prims.sum(prims.exp(y), (0,))), bf16)\n"
      "    return a, b, c\n";
  SourceManager sm;
  interp::Interpreter in{sm};
  DiagnosticList diags;
  auto m = in.load("m.trace", src, diags);
  REQUIRE(m);
  auto t = in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
  interp::Traces fused = interp::run_passes(in, {t}, {"fuse"}, {}, nullptr);
  // Three fusions, each with its reduction inside: nothing of the full shape leaves them.
  size_t fusions = 0;
  for (const ir::Stmt& s : fused[0]->stmts) {
    if (s.kind == ir::StmtKind::Del) continue;
    INFO(ir::print_stmt_line(s));
    CHECK(codegen::is_column_group(s));
    for (const auto& o : s.outputs) CHECK(rt::numel(o->type.shape) == 1);
    ++fusions;
  }
  CHECK(fusions == 3);
  auto ks = codegen::kernels_for(*fused[0]);
  REQUIRE(ks.size() == 3);
  std::string why;
  auto nvrtc = codegen::Nvrtc::load(&why);
  INFO(why);
  REQUIRE(nvrtc);
  struct Want {
    int64_t row_length;
    int width;
  };
  // 131072 elements: 64 rows of 2048, 8 bf16 a thread; 7007 = 7 * 7 * 11 * 13: 7 rows of 1001,
  // one a thread; 5000: rows of 1000 (a multiple of 8 of at least 256), 4 f32 a thread.
  const Want want[] = {{2048, 8}, {1001, 1}, {1000, 4}};
  for (size_t j = 0; j < ks.size(); ++j) {
    const codegen::Kernel& k = ks[j];
    INFO(k.origin);
    CHECK(k.columns);
    CHECK(k.column_fold);
    CHECK(k.row_length == want[j].row_length);
    CHECK(k.vector_width == want[j].width);
    // One partial per block of the first kernel and reduction; the second kernel is one block.
    const int64_t blocks = (k.row_length + k.column_block * k.vector_width - 1) / (k.column_block * k.vector_width) * k.column_chunks;
    CHECK(k.partials == blocks);
    CHECK_THAT(k.source, Catch::Contains("for (int w = 128; w > 0; w >>= 1)"));
    auto r = nvrtc->compile(k.source, k.name, "sm_90", codegen::Emit::cubin);
    INFO(r.log);
    CHECK(r.ok);
  }
  // The CPU's numbers, fused and not.
  std::vector<rt::Tensor> inputs;
  for (const auto& p : t->inputs) inputs.push_back(rt::uniform_philox(p->type.shape, -2.0, 2.0, p->type.dtype, 11, inputs.size(), nullptr));
  auto run = [&](const ir::Trace& tr) {
    ir::ExecContext ctx;
    std::vector<rt::Tensor> copies;
    for (const auto& x : inputs) copies.push_back(rt::cast(x, x.dtype(), nullptr));
    return ir::execute(tr, std::move(copies), ctx);
  };
  ir::Arg plain = run(*t), fast = run(*fused[0]);
  REQUIRE(plain.items.size() == 3);
  REQUIRE(fast.items.size() == 3);
  for (size_t j = 0; j < 3; ++j) {
    INFO("output " << j);
    CHECK(plain.items[j].tensor.dtype() == fast.items[j].tensor.dtype());
    CHECK(plain.items[j].tensor.get(0) == fast.items[j].tensor.get(0));
  }
}

TEST_CASE("horizontal column kernels: independent reductions as one pair of kernels that NVRTC compiles", "[codegen][nvrtc]") {
  // A gradient norm's sums of squares, a bias gradient's column sum and a maximum: independent
  // groups of other shapes and dtypes, as the executor would run them one after the other.
  const std::string src =
      "def f(a: bf16[13, 19], b: f32[7], c: f16[3, 1000], d: f32[4096, 9], e: f32[64, 40], g: bf16[8, 16]):\n"
      "    sa = sum(a.float() * a.float(), dtype=f32)\n"
      "    sb = sum(b * b)\n"
      "    sc = sum(c.float() * c.float(), dtype=f32)\n"
      "    sd = prims.sum(d * 2.0, (0,))\n"
      "    me = prims.amax(prims.abs(e), (0, 1))\n"
      "    gg = g * 2.0\n"
      "    sg = sum(gg.float())\n"
      "    return sa, sb, sc, sd, me, gg, sg\n";
  SourceManager sm;
  interp::Interpreter in{sm};
  DiagnosticList diags;
  auto m = in.load("m.trace", src, diags);
  REQUIRE(m);
  auto t = in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
  interp::Traces fused = interp::run_passes(in, {t}, {"fuse"}, {}, nullptr);
  std::vector<const ir::Stmt*> members;
  const ir::Stmt* full_output = nullptr;  // g's group also writes gg, of its full shape
  for (const ir::Stmt& s : fused[0]->stmts) {
    if (s.kind != ir::StmtKind::Fusion) continue;
    INFO(ir::print_stmt_line(s));
    REQUIRE(codegen::is_column_group(s));
    std::string why;
    if (codegen::is_horizontal_column_member(s, &why)) {
      members.push_back(&s);
    } else {
      CHECK(why == "an output of the full shape");
      full_output = &s;
    }
  }
  REQUIRE(members.size() == 5);
  CHECK(full_output);
  codegen::Kernel k = codegen::generate_columns_multi(members, "hc");
  CHECK(k.columns);
  REQUIRE(k.segment_params.size() == members.size());
  REQUIRE(k.segment_partials.size() == members.size());
  size_t params = 0;
  int64_t blocks = 0, partials = 0;
  for (size_t j = 0; j < members.size(); ++j) {
    // Each member as its own kernels would run it: the same grid and partials.
    codegen::Kernel one = codegen::generate_columns(*members[j], "k");
    INFO(one.origin);
    CHECK(static_cast<size_t>(k.segment_params[j]) == one.params.size());
    const int64_t per_block = one.column_block * std::max(1, one.vector_width);
    CHECK(k.segment_blocks[j] == (one.row_length + per_block - 1) / per_block * one.column_chunks);
    CHECK(k.segment_partials[j] == one.partials);
    params += one.params.size();
    blocks += k.segment_blocks[j];
    partials += std::max<int64_t>(one.partials, 1);
  }
  CHECK(params == k.params.size());
  CHECK(blocks == k.blocks);
  CHECK(partials == k.partials);
  // The second kernel: one block for a folded column, one per 32 columns for sd's 9.
  CHECK(k.blocks2 == 5);
  size_t kernels = 0;
  for (size_t at = k.source.find("__global__"); at != std::string::npos; at = k.source.find("__global__", at + 1)) ++kernels;
  CHECK(kernels == 2);
  CHECK_THAT(k.source, !Catch::Contains("blockIdx.y"));
  CHECK(k.symbol2 == k.symbol + "_2");
  std::string why;
  auto nvrtc = codegen::Nvrtc::load(&why);
  INFO(why);
  REQUIRE(nvrtc);
  INFO(k.source);
  auto r = nvrtc->compile(k.source, k.name, "sm_90", codegen::Emit::cubin);
  INFO(r.log);
  CHECK(r.ok);
  auto c = nvrtc->compile(k.structure, k.symbol, "sm_90", codegen::Emit::cubin);
  CHECK(c.ok);
  // A group with an output of its full shape, or more than 64 groups, is refused.
  CHECK_THROWS_AS(codegen::generate_columns_multi({members[0], full_output}, "hc"), std::invalid_argument);
  CHECK_THROWS_AS(codegen::generate_columns_multi(std::vector<const ir::Stmt*>(65, members[0]), "hc"), std::invalid_argument);
}


TEST_CASE("column kernels fill one wave of two blocks a multiprocessor, whatever the group's shape", "[codegen][nvrtc]") {
  // 264 blocks at most (two a multiprocessor of 132, up to four reductions), the first kernel's
  // launch bounds saying so; rows a chunk in steps of the lanes' 4-row batches, at least 8 a lane; every row covered
  // once. Session 23 measured the earlier rule's 384 blocks at 124 registers a thread (a second
  // wave of 120): three [8192, 768] sums took 28.8 us on an H100, 20.3 us sized this way.
  std::string why;
  auto nvrtc = codegen::Nvrtc::load(&why);
  INFO(why);
  REQUIRE(nvrtc);
  struct Case {
    int64_t R, C;
    std::string dt;
  };
  for (const Case& c : {Case{8192, 768, "bf16"}, Case{8192, 3072, "bf16"}, Case{1000, 768, "f32"}, Case{77, 40, "f32"},
                        Case{8191, 2304, "bf16"}, Case{300000, 96, "bf16"}, Case{64, 70000, "bf16"}}) {
    INFO(c.R << " x " << c.C << " " << c.dt);
    SourceManager sm;
    interp::Interpreter in{sm};
    DiagnosticList diags;
    const std::string shape = c.dt + "[" + std::to_string(c.R) + ", " + std::to_string(c.C) + "]";
    auto m = in.load("m.trace", "def f(x: " + shape + ", g: " + shape + ", d: " + shape +
                                    "):\n    return prims.sum(d, (0,)), prims.sum(g * x, (0,)), prims.sum(g, (0,))\n", diags);
    REQUIRE(m);
    auto t = interp::run_passes(in, {in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {})}, {"fuse"}, {}, nullptr)[0];
    const ir::Stmt* col = nullptr;
    for (const auto& s : t->stmts)
      if (codegen::is_column_group(s)) col = &s;
    REQUIRE(col);
    codegen::Kernel k = codegen::generate_columns(*col, "k");
    const int64_t per_block = k.column_block * std::max(1, k.vector_width);
    const int64_t gx = (c.C + per_block - 1) / per_block;
    const int64_t lanes = 256 / k.column_block;  // lanes of rows a block
    if (gx < 264) {
      CHECK(gx * k.column_chunks <= 264);
      // more than one block a multiprocessor, where the rows allow (8 rows a lane at least)
      if (gx * ((c.R + 8 * lanes - 1) / (8 * lanes)) > 132) CHECK(gx * k.column_chunks > 132);
      CHECK_THAT(k.source, Catch::Contains("__launch_bounds__(256, 2) k("));
    }
    // The chunk's rows, read back from the kernel's text: they cover the rows once.
    const std::string key = "blockIdx.y * ";
    const size_t at = k.source.find(key);
    REQUIRE(at != std::string::npos);
    const int64_t rows = std::atoll(k.source.c_str() + at + key.size());
    CHECK(rows % (4 * lanes) == 0);
    CHECK(rows >= 8 * lanes);
    CHECK(k.column_chunks == (c.R + rows - 1) / rows);
    auto r = nvrtc->compile(k.source, k.name, "sm_90", codegen::Emit::cubin);
    INFO(r.log);
    CHECK(r.ok);
  }
  // Five sums of 8 columns a thread (40 accumulators) would spill under 128 registers: one block
  // a multiprocessor, 132 blocks at most, no launch bound of two.
  SourceManager sm;
  interp::Interpreter in{sm};
  DiagnosticList diags;
  std::string params, outs;
  for (int i = 0; i < 5; ++i) {
    params += std::string(i ? ", " : "") + "x" + std::to_string(i) + ": bf16[8192, 768]";
    outs += std::string(i ? ", " : "") + "sum(x" + std::to_string(i) + ".float() * x" + std::to_string((i + 1) % 5) + ".float(), (0,))";
  }
  auto m = in.load("m.trace", "def f(" + params + "):\n    return " + outs + "\n", diags);
  REQUIRE(m);
  auto t = interp::run_passes(in, {in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {})}, {"fuse"}, {}, nullptr)[0];
  const ir::Stmt* col = nullptr;
  size_t groups = 0;
  for (const auto& s : t->stmts)
    if (codegen::is_column_group(s)) col = &s, ++groups;
  REQUIRE(groups == 1);
  codegen::Kernel k = codegen::generate_columns(*col, "k");
  CHECK(k.column_reductions == 5);
  CHECK(3 * k.column_chunks <= 132);
  CHECK(3 * k.column_chunks > 66);
  CHECK_THAT(k.source, Catch::Contains("__launch_bounds__(256) k("));
}

}  // namespace tracer::test
