// Code generation (docs/codegen.md): every example's elementwise groups become CUDA C++ that NVRTC
// compiles to an sm_90 cubin without a GPU; the generated source has the structure the design
// asks for; bad input to `compile` is reported.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "codegen/cuda_codegen.h"
#include "codegen/cuda_attention.h"
#include "codegen/cuda_codegen_detail.h"
#include "codegen/cuda_exec.h"
#include "codegen/cuda_reduce.h"
#include "codegen/nvrtc.h"
#include "interpreter/passes.h"
#include "ir/fusion.h"
#include "ir/group.h"
#include "ir/verify.h"
#include "runtime/kernels.h"
#include "tests/codegen_support.h"
#include "tests/support.h"
#include "tracer/session.h"

namespace tracer::test {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / ("tracer_codegen_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string first_bytes(const std::string& path, size_t n) {
  std::ifstream f(path, std::ios::binary);
  std::string s(n, '\0');
  f.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<size_t>(f.gcount()));
  return s;
}


}  // namespace

TEST_CASE("NVRTC compiles every example's kernels to sm_90 cubins", "[codegen][nvrtc]") {
  std::string why;
  auto nvrtc = codegen::Nvrtc::load(&why);
  INFO(why);
  // Required: CI has the CUDA toolkit, and this test must not pass by skipping.
  REQUIRE(nvrtc);
  const std::vector<std::vector<std::string>> pipelines = {
      {}, {"grad", "checkpoint", "philox", "remat", "del_last_used"},
      // fuse_reorder brings chained random offsets into the draws' groups
      {"grad", "checkpoint", "philox", "remat", "fuse_reorder", "del_last_used"}};
  for (const std::string& f : example_programs(source_dir() + "/examples")) {
    for (const auto& passes : pipelines) {
      DYNAMIC_SECTION(f << " --passes " << passes.size()) {
        Session s;
        REQUIRE(s.load_file(f));
        REQUIRE(s.set_passes(passes));
        auto entry = s.entry("");
        REQUIRE(entry);
        fs::path dir = temp_dir("ex");
        auto r = s.compile(*entry, "sm_90", "cubin", dir.string());
        INFO(s.rendered_diagnostics());
        if (!r && s.rendered_diagnostics().find("grad needs") != std::string::npos) continue;  // no scalar loss
        REQUIRE(r);
        CHECK(r->nvrtc_version.rfind("1", 0) == 0);
        CHECK_FALSE(r->kernels.empty());
        for (const auto& k : r->kernels) {
          INFO(k.name << ": " << k.statement);
          CHECK(fs::exists(k.file));
          CHECK(fs::file_size(k.file) == k.bytes);
          CHECK(first_bytes(k.file, 4) == "\x7f" "ELF");
          CHECK(k.elements > 0);
        }
        fs::remove_all(dir);
      }
    }
  }
}

TEST_CASE("NVRTC compiles the kernels of every op on every dtype (tests/gpu/ops.trace)", "[codegen][nvrtc]") {
  std::string why;
  REQUIRE(codegen::Nvrtc::load(&why));
  const std::string file = source_dir() + "/tests/gpu/ops.trace";
  for (const char* entry : {"ops_f32", "ops_unary_more", "ops_special", "ops_thunder_more", "ops_bitcast", "ops_bf16", "ops_f16", "ops_f64", "ops_i32", "ops_i64", "ops_i8", "ops_u8", "ops_b8",
                            "ops_reduce_f32", "ops_reduce_lowp", "ops_broadcast", "ops_matmul", "ops_layout", "ops_fallback", "ops_gather", "ops_gather_long", "ops_rows", "ops_column_views",
                            "ops_scatter_reduce", "ops_pads", "ops_special_tails"}) {
    DYNAMIC_SECTION(entry) {
      // compile applies fuse itself: the groups the GPU would run.
      Session s;
      REQUIRE(s.load_file(file));
      fs::path dir = temp_dir("ops");
      auto r = s.compile(entry, "sm_90", "cubin", dir.string());
      INFO(s.rendered_diagnostics());
      REQUIRE(r);
      for (const auto& k : r->kernels) CHECK(first_bytes(k.file, 4) == "\x7f" "ELF");
      fs::remove_all(dir);
    }
  }
}

TEST_CASE("NVRTC compiles the kernels of Thunder's executors' operators (tests/gpu/executors.trace)", "[codegen][nvrtc]") {
  // stdlib/executors.trace's operators (cross-entropy and batch-norm backward, apex's RMS norm)
  // and grid_sample's volumes and bicubic taps, as tests/gpu/executors_torch.py runs them.
  std::string why;
  REQUIRE(codegen::Nvrtc::load(&why));
  Session s;
  REQUIRE(s.load_file(source_dir() + "/tests/gpu/executors.trace"));
  fs::path dir = temp_dir("executors");
  auto r = s.compile("executors", "sm_90", "cubin", dir.string());
  INFO(s.rendered_diagnostics());
  REQUIRE(r);
  CHECK(r->kernels.size() > 100);
  for (const auto& k : r->kernels) CHECK(first_bytes(k.file, 4) == "\x7f" "ELF");
  fs::remove_all(dir);
}

TEST_CASE("NVRTC compiles the kernels of writes through views (tests/gpu/inplace.trace)", "[codegen][nvrtc]") {
  // prims.copy_ into slices, a transpose, a strided slice and a bf16 tensor, as
  // tests/gpu/inplace_torch.py runs them: the positions' scatters and the inverted views.
  std::string why;
  REQUIRE(codegen::Nvrtc::load(&why));
  Session s;
  REQUIRE(s.load_file(source_dir() + "/tests/gpu/inplace.trace"));
  fs::path dir = temp_dir("inplace");
  auto r = s.compile("inplace", "sm_90", "cubin", dir.string());
  INFO(s.rendered_diagnostics());
  REQUIRE(r);
  CHECK(r->kernels.size() > 20);
  for (const auto& k : r->kernels) CHECK(first_bytes(k.file, 4) == "\x7f" "ELF");
  fs::remove_all(dir);
}

TEST_CASE("NVRTC compiles a convolution network's kernels under grad (tests/gpu/conv.trace)", "[codegen][nvrtc]") {
  std::string why;
  REQUIRE(codegen::Nvrtc::load(&why));
  for (const char* entry : {"main", "bf16"}) {
    DYNAMIC_SECTION(entry) {
      // The windows are gathers (prims.take), the products matmuls: both run as kernels.
      Session s;
      REQUIRE(s.load_file(source_dir() + "/tests/gpu/conv.trace"));
      REQUIRE(s.set_passes({"grad", "fuse", "del_last_used"}));
      fs::path dir = temp_dir("conv");
      auto r = s.compile(entry, "sm_90", "cubin", dir.string());
      INFO(s.rendered_diagnostics());
      REQUIRE(r);
      int gathers = 0;
      for (const auto& k : r->kernels) {
        CHECK(first_bytes(k.file, 4) == "\x7f" "ELF");
        gathers += k.statement.find("prims.take") != std::string::npos;
      }
      CHECK(gathers > 0);
      fs::remove_all(dir);
    }
  }
}

TEST_CASE("NVRTC compiles attention's kernels, forward and backward (tests/gpu/attention.trace)", "[codegen][nvrtc]") {
  std::string why;
  REQUIRE(codegen::Nvrtc::load(&why));
  const std::string file = source_dir() + "/tests/gpu/attention.trace";
  for (const char* entry : {"attention_causal", "attention_masked", "attention_rows_f32", "attention_rows_ev"}) {
    DYNAMIC_SECTION(entry) {
      Session s;
      REQUIRE(s.load_file(file));
      REQUIRE(s.set_passes({"grad", "philox", "remat", "fuse", "del_last_used"}));
      fs::path dir = temp_dir("attn");
      auto r = s.compile(entry, "sm_90", "cuda", dir.string());
      INFO(s.rendered_diagnostics());
      REQUIRE(r);
      // The permutes of the heads are kernels, not CPU work. The causal bf16 attention is the
      // fused prims.attention (one flash kernel; three for its backward); f32 (with a mask or
      // without), and values of another head size, take the one-warp-per-row kernels (one
      // forward, two backward; the masked one's mask gradient is the decomposed formula's).
      int transposes = 0, forward = 0, backward = 0;
      for (const auto& k : r->kernels) {
        transposes += k.statement.find("prims.transpose") != std::string::npos;
        forward += k.statement.find("prims.attention(") != std::string::npos;
        backward += k.statement.find("prims.attention_backward(") != std::string::npos;
      }
      std::string e = entry;
      if (e == "attention_causal") CHECK(transposes > 0);
      CHECK(forward == 1);
      CHECK(backward == (e == "attention_causal" ? 3 : 2));
      auto cubins = s.compile(entry, "sm_90", "cubin", (dir / "bin").string());
      REQUIRE(cubins);
      for (const auto& k : cubins->kernels) CHECK(first_bytes(k.file, 4) == "\x7f" "ELF");
      fs::remove_all(dir);
    }
  }
}

TEST_CASE("NVRTC compiles the attention kernels for older GPUs too (sm_75, sm_80)", "[codegen][nvrtc]") {
  // The flash kernels use sm_80 instructions (ldmatrix, cp.async, bf16 products) and sm_90 ones
  // (vector reductions, behind an architecture guard): for sm_80 they compile; for sm_75 the
  // rows kernels are listed instead (one forward, two backward), as the executor would run them.
  std::string why;
  REQUIRE(codegen::Nvrtc::load(&why));
  const std::string file = source_dir() + "/tests/gpu/attention.trace";
  for (const char* arch : {"sm_75", "sm_80"}) {
    DYNAMIC_SECTION(arch) {
      Session s;
      REQUIRE(s.load_file(file));
      REQUIRE(s.set_passes({"grad", "del_last_used"}));
      fs::path dir = temp_dir("attn_old");
      auto r = s.compile("attention_heads128", arch, "cubin", dir.string());
      INFO(s.rendered_diagnostics());
      REQUIRE(r);
      int flash = 0;
      for (const auto& k : r->kernels) {
        flash += k.statement.find("prims.attention") != std::string::npos;
        CHECK(first_bytes(k.file, 4) == "\x7f" "ELF");
      }
      // sm_80: the flash forward, and the backward's delta, main and dq kernels; sm_75: rows.
      CHECK(flash == (std::string(arch) == "sm_80" ? 4 : 3));
      fs::remove_all(dir);
    }
  }
}

TEST_CASE("softmax and rms_norm become row groups: one kernel, one block per row", "[codegen]") {
  // `big` leaves room under the program's peak, so fuse makes the row groups. Both read the rows
  // of x: they share one kernel (x read once), which writes both outputs and nothing else.
  auto ks = kernels_of(R"(
def f(x: f32[64, 32], w: f32[32], big: f32[4096, 64]):
    s = ltorch.softmax(x, -1)
    n = ltorch.rms_norm(x, (32,), w)
    return s, n, big * 2.0
)",
                       "f");
  std::vector<const codegen::Kernel*> rows;
  for (const auto& k : ks)
    if (k.rows > 0) rows.push_back(&k);
  REQUIRE(rows.size() == 1);
  const codegen::Kernel* k = rows[0];
  INFO(k->source);
  CHECK(k->rows == 64);
  CHECK(k->row_length == 32);
  // Rows of 32: one warp per row, 8 rows a block, reduced by shuffles.
  CHECK(k->row_lanes == 32);
  CHECK_THAT(k->source, Catch::Contains("for (long long tr_r = (long long)blockIdx.x * 8 + (threadIdx.x >> 5); tr_r < tr_rows;"));
  CHECK_THAT(k->source, Catch::Contains("__shfl_down_sync"));
  // Accumulators in double; softmax's maximum and rms_norm's sum of squares share the first pass.
  CHECK_THAT(k->source, Catch::Contains("double tr_red0, tr_acc0 = ") && Catch::Contains("double tr_red1, tr_acc1 = "));
  // f32 rows of 32: 16-byte accesses of 4 elements when the launcher finds the pointers
  // aligned, one element at a time otherwise.
  CHECK(k->vector_width == 4);
  CHECK_THAT(k->source, Catch::Contains("if (vec_ok) {"));
  CHECK_THAT(k->source, Catch::Contains("tr_copy<4 * sizeof(float)>("));
  CHECK_THAT(k->source, Catch::Contains("prims.amax over the row"));
  size_t sums = 0;
  for (size_t at = k->source.find("prims.sum over the row"); at != std::string::npos; at = k->source.find("prims.sum over the row", at + 1)) ++sums;
  CHECK(sums == 2);  // softmax's and rms_norm's
  // Two passes by default: the maximum, then the sums (softmax's of exponentials needs it).
  CHECK_THAT(k->source, !Catch::Contains("(online: with its own running maximum)"));
  // The rows' outputs only: no intermediate is written.
  size_t outputs = 0;
  for (const auto& p : k->params) outputs += p.output;
  CHECK(outputs == 2);
  // Rows longer than 4096: one block of 256 threads each, reduced in shared memory.
  auto wide = kernels_of("def f(x: f32[8, 5000], big: f32[4096, 4096]):\n    return ltorch.softmax(x, -1), big * 2.0\n", "f");
  const codegen::Kernel* w = nullptr;
  for (const auto& x : wide)
    if (x.rows > 0) w = &x;
  REQUIRE(w);
  CHECK(w->row_lanes == 256);
  CHECK_THAT(w->source, Catch::Contains("for (long long tr_r = blockIdx.x; tr_r < tr_rows; tr_r += gridDim.x)"));
  CHECK_THAT(w->source, Catch::Contains("__syncthreads()"));
  // Two passes (the maximum, then the sum and the output): each reads the rows from memory (the
  // second mostly from L2) unless TRACER_ROWS_SHARED=1 keeps them in shared memory.
  CHECK(w->shared_bytes == 0);
  setenv("TRACER_ROWS_SHARED", "1", 1);
  auto kept = kernels_of("def f(x: f32[8, 5000], big: f32[4096, 4096]):\n    return ltorch.softmax(x, -1), big * 2.0\n", "f");
  unsetenv("TRACER_ROWS_SHARED");
  for (const auto& x : kept)
    if (x.rows > 0) CHECK(x.shared_bytes > 0);
  // With TRACER_ROWS_ONLINE=1 a logsumexp reads each row once (the maximum and the sum online,
  // nothing of the rows' shape written): straight from memory, no shared copy.
  setenv("TRACER_ROWS_ONLINE", "1", 1);
  auto lse = kernels_of("def f(x: bf16[8, 50304], big: f32[4096, 4096]):\n    return ltorch.logsumexp(x, 1, keepdim=True), big * 2.0\n", "f");
  const codegen::Kernel* l = nullptr;
  for (const auto& x : lse)
    if (x.rows > 0) l = &x;
  REQUIRE(l);
  INFO(l->source);
  CHECK(l->row_lanes == 256);
  CHECK(l->shared_bytes == 0);
  CHECK_THAT(l->source, Catch::Contains("(online: with its own running maximum)"));
  auto soft = kernels_of("def f(x: f32[64, 32], big: f32[4096, 64]):\n    return ltorch.softmax(x, -1), big * 2.0\n", "f");
  unsetenv("TRACER_ROWS_ONLINE");
  bool online = false;
  for (const auto& x : soft) online = online || x.source.find("(online: with its own running maximum)") != std::string::npos;
  CHECK(online);
  // By default: online for long rows (read from memory on every pass), not for short ones (in
  // registers).
  auto lse_default = kernels_of("def f(x: bf16[8, 50304], big: f32[4096, 4096]):\n    return ltorch.logsumexp(x, 1, keepdim=True), big * 2.0\n", "f");
  bool long_online = false;
  for (const auto& x : lse_default) long_online = long_online || (x.rows > 0 && x.row_passes == 1 && x.source.find("(online: with its own running maximum)") != std::string::npos);
  CHECK(long_online);
  auto soft_default = kernels_of("def f(x: f32[64, 32], big: f32[4096, 64]):\n    return ltorch.softmax(x, -1), big * 2.0\n", "f");
  for (const auto& x : soft_default) CHECK(x.source.find("(online: with its own running maximum)") == std::string::npos);
  // Off (TRACER_ROWS_ONLINE=0): two passes; with TRACER_ROWS_SHARED=1 the row kept in shared memory.
  setenv("TRACER_ROWS_SHARED", "1", 1);
  setenv("TRACER_ROWS_ONLINE", "0", 1);
  auto lse2 = kernels_of("def f(x: bf16[8, 50304], big: f32[4096, 4096]):\n    return ltorch.logsumexp(x, 1, keepdim=True), big * 2.0\n", "f");
  unsetenv("TRACER_ROWS_ONLINE");
  unsetenv("TRACER_ROWS_SHARED");
  int wide_rows = 0;
  for (const auto& x : lse2)
    if (x.rows > 0) {
      CHECK(x.shared_bytes > 0);
      ++wide_rows;
    }
  CHECK(wide_rows == 1);
}

TEST_CASE("the training pipeline's norms become row kernels (llama_mlp_checkpoint)", "[codegen]") {
  // The program test_grad.cpp checks bit for bit against the unfused one on the CPU.
  Session s;
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{{"T", "16"}, {"L", "3"}, {"D", "32"}, {"H", "48"}})
    s.set(k, v);
  REQUIRE(s.load_file(source_dir() + "/examples/llama_mlp_checkpoint.trace"));
  REQUIRE(s.set_passes({"grad", "checkpoint", "philox", "remat", "fuse", "del_last_used"}));
  fs::path dir = temp_dir("rows");
  auto r = s.compile(*s.entry(""), "sm_90", "cuda", dir.string());
  INFO(s.rendered_diagnostics());
  REQUIRE(r);
  int rows = 0, forward = 0, backward = 0;
  for (const auto& k : r->kernels) {
    std::ifstream f(k.file);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (text.find("over the row") == std::string::npos) continue;
    ++rows;
    (k.trace == "backward" ? backward : forward)++;
  }
  CHECK(forward > 0);
  CHECK(backward > 0);
  CHECK(rows == forward + backward);
  fs::remove_all(dir);
}

TEST_CASE("generated kernels are named after the trace, vectorized and round bf16 intermediates", "[codegen]") {
  auto ks = kernels_of(R"(
def f(x: bf16[64, 32], b: bf16[32], r: f32[64, 1]):
    y = x * b
    z = ltorch.gelu(y)
    w = float32(z) * r
    return w
)",
                       "f");
  REQUIRE(ks.size() == 1);
  const codegen::Kernel& k = ks[0];
  INFO(k.source);
  CHECK(k.name == "f_fusion0_0");
  CHECK(k.elements == 64 * 32);
  // The narrowest full-size tensor is bf16 (x): 8 elements per 16-byte access.
  CHECK(k.vector_width == 8);
  CHECK_THAT(k.source, Catch::Contains("extern \"C\" __global__ void __launch_bounds__(256) f_fusion0_0("));
  CHECK_THAT(k.source, Catch::Contains("const tr_bf16* __restrict__ p_x"));
  CHECK_THAT(k.source, Catch::Contains("float* __restrict__ p_w"));
  // Broadcast inputs through constant index maps: b along rows, r along columns.
  // b runs along the last dimension: one vector load per 8 elements, i % 32 in the tail.
  CHECK_THAT(k.source, Catch::Contains("tr_copy<V * sizeof(tr_bf16)>(b_v, p_b + i0 % 32);"));
  CHECK_THAT(k.source, Catch::Contains("p_b[i % 32]"));
  // r, one per row: read at the element's row, which a vector of 8 computes once.
  CHECK_THAT(k.source, Catch::Contains("p_r[(long long)((int)tr_r)]"));
  CHECK_THAT(k.source, Catch::Contains("const int tr_r0 = i0 / 32, tr_c0 = i0 - tr_r0 * 32;"));
  // A bf16 intermediate is rounded as the CPU stores it; one line per op, named from the trace.
  CHECK_THAT(k.source, Catch::Contains("const float y = tr_round_bf16((x * b));  // y = prims.mul"));
  CHECK_THAT(k.source, Catch::Contains("tr_copy<V * sizeof(tr_bf16)>(x_v, p_x + i0);"));
  // 2048 elements: 32-bit indices (64-bit ones from 2^31 elements on).
  CHECK_THAT(k.source, Catch::Contains("for (int i = nvec * V + first; i < (int)n; i += stride)"));
  REQUIRE(k.params.size() == 4);
  CHECK(k.params[3].name == "w");
  CHECK(k.params[3].output);
}

TEST_CASE("integer, bool and mixed-dtype groups generate and compile", "[codegen][nvrtc]") {
  auto ks = kernels_of(R"(
def f(a: i32[128], b: i64[128], m: b8[128], h: f16[128]):
    q = prims.floor_divide(a, 7)
    s = prims.remainder(b, q)
    t = prims.where(m, s, 0)
    u = prims.maximum(float32(h), 0.5) > 1.0
    v = prims.logical_and(u, m)
    return t, v
)",
                       "f");
  REQUIRE_FALSE(ks.empty());
  std::string why;
  auto nvrtc = codegen::Nvrtc::load(&why);
  INFO(why);
  REQUIRE(nvrtc);
  for (const auto& k : ks) {
    INFO(k.source);
    auto r = nvrtc->compile(k.source, k.name, "sm_90", codegen::Emit::cubin);
    INFO(r.log);
    CHECK(r.ok);
    auto p = nvrtc->compile(k.source, k.name, "sm_90", codegen::Emit::ptx);
    CHECK(p.ok);
    CHECK_THAT(p.binary, Catch::Contains(".target sm_90"));
  }
  // bitwise_not on bool is logical not, as on the CPU (not ~1, which is nonzero).
  auto kb = kernels_of("def f(m: b8[64]):\n    return prims.bitwise_not(m)\n", "f");
  REQUIRE(kb.size() == 1);
  CHECK_THAT(kb[0].source, Catch::Contains("const bool t0 = ((long long)(m) == 0);"));
  bool saw_int_ops = false;
  for (const auto& k : ks) saw_int_ops = saw_int_ops || k.source.find("tr_ifloordiv(") != std::string::npos;
  CHECK(saw_int_ops);
}

TEST_CASE("take_backward's kernels compile, plain and added into an addend in place", "[codegen][nvrtc]") {
  SourceManager sm;
  interp::Interpreter in{sm};
  DiagnosticList diags;
  // Widths whose rows are and are not a multiple of 16 bytes; index types i64 and i32.
  auto m = in.load("m.trace", R"(
def f(g: bf16[6, 768], i: i64[6], h: f32[5, 3, 7], j: i32[5, 3], n: i64[9, 2], k: i64[9], d: f64[4, 5], l: i64[4]):
    return (prims.take_backward(g, i, 50304), prims.take_backward(h, j, 11), prims.take_backward(n, k, 3),
            prims.take_backward(d, l, 2))
)", diags);
  REQUIRE(m);
  auto t = in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
  std::string why;
  auto nvrtc = codegen::Nvrtc::load(&why);
  REQUIRE(nvrtc);
  int made = 0;
  for (const ir::Stmt& s : t->stmts) {
    if (!s.op || s.op->name != "take_backward") continue;
    for (bool acc : {false, true}) {
      codegen::SimpleKernel k;
      std::string no;
      INFO(ir::print_stmt_line(s) << (acc ? " into an addend" : "") << ": " << no);
      REQUIRE(codegen::generate_take_backward(s, &k, &no, acc));
      CHECK(k.stages == 5);
      INFO(k.source);
      // Into an addend: untouched rows are skipped (no zero fill) and each sum is rounded to the
      // output type before it is added, as the CPU's two statements round.
      CHECK((k.source.find("(and into the addend already there)") != std::string::npos) == acc);
      CHECK((k.source.find("if (n == 0) continue;") != std::string::npos) == acc);
      if (acc) CHECK_THAT(k.source, Catch::Contains("sum_ = "));
      auto r = nvrtc->compile(k.source, k.symbol, "sm_90", codegen::Emit::cubin);
      INFO(r.log);
      CHECK(r.ok);
      ++made;
    }
  }
  CHECK(made == 8);
}

TEST_CASE("the disk kernel cache detects corrupt and truncated entries", "[codegen][cache]") {
  fs::path dir = temp_dir("cache");
  codegen::KernelCache cache(dir.string());
  std::string cubin = std::string("\x7f" "ELF", 4) + std::string(1000, 'k');
  CHECK(cache.load("abc").empty());  // absent
  cache.store("abc", cubin);
  CHECK(cache.load("abc") == cubin);
  fs::path f = dir / "abc.cubin";
  REQUIRE(fs::exists(f));
  // A truncated entry (a crash while writing would leave none: entries are renamed into place).
  fs::resize_file(f, fs::file_size(f) - 10);
  CHECK(cache.load("abc").empty());
  cache.store("abc", cubin);
  REQUIRE(cache.load("abc") == cubin);
  // A flipped byte in the payload.
  {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(500);
    io.put('X');
  }
  CHECK(cache.load("abc").empty());
  // Garbage.
  std::ofstream(f, std::ios::binary) << "not a cache entry";
  CHECK(cache.load("abc").empty());
  // The default directory follows TRACER_CACHE_DIR.
  ::setenv("TRACER_CACHE_DIR", dir.string().c_str(), 1);
  CHECK(codegen::KernelCache::default_dir() == dir.string());
  ::unsetenv("TRACER_CACHE_DIR");
  fs::remove_all(dir);
}

TEST_CASE("a kernel NVRTC rejects is reported with the log first, then the lines it names", "[codegen][nvrtc]") {
  std::string why;
  auto nvrtc = codegen::Nvrtc::load(&why);
  REQUIRE(nvrtc);
  // 40 lines of which line 20 is wrong: the report shows lines 18-22, not the rest.
  std::string src = "extern \"C\" __global__ void k(float* p) {\n";
  for (int i = 2; i < 20; ++i) src += "  p[" + std::to_string(i) + "] = 1.0f;\n";
  src += "  p[0] = undefined_name;\n";
  for (int i = 21; i < 40; ++i) src += "  p[" + std::to_string(i) + "] = 2.0f;\n";
  src += "}\n";
  auto r = nvrtc->compile(src, "k", "sm_90", codegen::Emit::cubin);
  CHECK_FALSE(r.ok);
  std::string text = codegen::Nvrtc::explain("k", src, r.log);
  INFO(text);
  CHECK(text.rfind("NVRTC could not compile kernel 'k':\n", 0) == 0);
  CHECK(text.find("undefined_name") < text.find("generated source"));  // the error first
  CHECK_THAT(text, Catch::Contains("   20 |   p[0] = undefined_name;"));
  CHECK_THAT(text, Catch::Contains("   18 |   p[18] = 1.0f;") && Catch::Contains("   22 |   p[22] = 2.0f;"));
  CHECK_THAT(text, !Catch::Contains("p[5] = 1.0f") && !Catch::Contains("p[30] = 2.0f"));
  // An error that names no line (a bad architecture): the log alone.
  auto bad = nvrtc->compile(src, "k", "sm_12", codegen::Emit::cubin);
  CHECK_FALSE(bad.ok);
  std::string t2 = codegen::Nvrtc::explain("k", src, bad.log);
  CHECK_THAT(t2, Catch::Contains("gpu-architecture") && !Catch::Contains("p[0]"));
}

TEST_CASE("compile reports bad arguments and non-elementwise statements are left out", "[codegen]") {
  Session s;
  REQUIRE(s.load_string("m", "def f(x: f32[8, 8], w: f32[8, 8]):\n    return prims.matmul(x, w) + 1.0\n"));
  fs::path dir = temp_dir("bad");
  CHECK_FALSE(s.compile("f", "gfx90a", "cubin", dir.string()));
  CHECK_THAT(s.rendered_diagnostics(), Catch::Contains("unknown GPU architecture 'gfx90a'"));
  Session s2;
  REQUIRE(s2.load_string("m", "def f(x: f32[8, 8], w: f32[8, 8]):\n    return prims.matmul(x, w) + 1.0\n"));
  CHECK_FALSE(s2.compile("f", "sm_90", "sass", dir.string()));
  CHECK_THAT(s2.rendered_diagnostics(), Catch::Contains("unknown --emit 'sass'"));
  Session s3;
  REQUIRE(s3.load_string("m", "def f(x: f32[8, 8], w: f32[8, 8]):\n    return prims.matmul(x, w) + 1.0\n"));
  auto r = s3.compile("f", "sm_90", "cuda", dir.string());
  INFO(s3.rendered_diagnostics());
  REQUIRE(r);
  REQUIRE(r->kernels.size() == 1);  // the add; the matmul goes to a library
  CHECK_THAT(r->kernels[0].statement, Catch::Contains("prims.add"));
  CHECK(r->nvrtc_version.empty());
  // An output directory that cannot be created.
  fs::path file = dir / "a_file";
  std::ofstream(file) << "x";
  Session s4;
  REQUIRE(s4.load_string("m", "def f(x: f32[8]):\n    return x + 1.0\n"));
  CHECK_FALSE(s4.compile("f", "sm_90", "cuda", (file / "sub").string()));
  CHECK_THAT(s4.rendered_diagnostics(), Catch::Contains("cannot create the output directory"));
  fs::remove_all(dir);
  std::string not_why;
  CHECK_FALSE(codegen::is_elementwise_group(ir::Stmt{}, &not_why));
}



// The GPU executor writes an elementwise group's output over an input that dies at it (buffer
// reuse). A kernel that declared both pointers __restrict__ let ptxas move the output's store
// above the input's load: the GPT's bias and norm gradients came out wrong by a factor of 1e5
// under grad,remat,fuse,del_last_used (issue 12). Every pair the executor may share must be
// declared without restrict; the rule here is the executor's, written out independently.
TEST_CASE("pointers that buffer reuse may alias are not __restrict__ (GPT, every pipeline)", "[codegen]") {
  for (const std::vector<std::string>& passes :
       std::vector<std::vector<std::string>>{{"grad", "del_last_used"},
                                             {"grad", "fuse", "del_last_used"},
                                             {"grad", "remat", "fuse", "del_last_used"},
                                             {"grad", "philox", "remat", "fuse_reorder", "del_last_used"}}) {
    SourceManager sm;
    interp::Interpreter in{sm};
    interp::Traces prog = gpt_program(in, passes);
    size_t pairs = 0;
    for (const auto& t : prog) {
      std::vector<codegen::Kernel> ks = codegen::kernels_for(*t);
      auto lazy = ir::lazy_transposes(t->stmts, &t->output);
      for (size_t i = 0; i < t->stmts.size(); ++i) {
        const ir::Stmt& s = t->stmts[i];
        if (s.kind == ir::StmtKind::Del || !codegen::is_elementwise_group(s)) continue;
        if (s.outputs.size() == 1 && lazy.count(s.outputs[0].get())) continue;  // a view the matmul reads
        // The values the dels right after s delete.
        std::unordered_set<const ir::Proxy*> dying;
        for (size_t j = i + 1; j < t->stmts.size() && t->stmts[j].kind == ir::StmtKind::Del; ++j)
          for (const auto& p : t->stmts[j].deleted) dying.insert(p.get());
        std::string line = ir::print_stmt_line(s);
        const codegen::Kernel* k = nullptr;
        for (const auto& x : ks)
          if (x.origin == line) k = &x;
        INFO(line);
        REQUIRE(k);
        for (const auto& q : k->params) {
          if (q.output || !dying.count(q.proxy.get())) continue;
          for (const auto& o : k->params) {
            if (!o.output || o.type.dtype != q.type.dtype || o.type.shape != q.type.shape) continue;
            ++pairs;
            INFO(q.name << " may become " << o.name);
            CHECK(q.may_alias);
            CHECK(o.may_alias);
            std::string qn = codegen::detail::c_name(q.name), on = codegen::detail::c_name(o.name);
            CHECK_THAT(k->source, !Catch::Contains("__restrict__ p_" + qn + ",") && Catch::Contains("* p_" + qn + ","));
            CHECK_THAT(k->source, Catch::Contains("* p_" + on + ","));
          }
        }
        // Pointers that nobody shares keep restrict (the read-only path for inputs).
        for (const auto& q : k->params)
          if (!q.may_alias) CHECK_THAT(k->source, Catch::Contains("__restrict__ p_" + codegen::detail::c_name(q.name) + ","));
      }
    }
    CHECK(pairs > 0);  // the pipelines do reuse buffers
  }
}

// A view strides (and sub-dimensions) cannot express: the plan refuses the group with a reason,
// and fuse materializes the merged value in one kernel and slices it in another (ops_views checks
// the numbers on the CPU and the GPU).
TEST_CASE("a slice of merged dimensions strides cannot express is not fused, and says why", "[codegen][fuse]") {
  SourceManager sm;
  interp::Interpreter in{sm};
  DiagnosticList diags;
  auto m = in.load("v.trace", R"(
def f(x: f32[6, 10, 4]):
    t = prims.transpose(x, (2, 0, 1))
    r = prims.reshape(t, (24, 10))
    s = prims.slice(r, (3, 0), (9, 10))
    return s * 2.0
)", diags);
  REQUIRE(m);
  auto t = in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
  std::vector<const ir::Stmt*> prims;
  for (const auto& s : t->stmts)
    if (s.kind != ir::StmtKind::Del) prims.push_back(&s);
  ir::GroupPlan g = ir::plan_group(prims, {t->stmts.back().outputs[0]});
  CHECK(g.kind == ir::GroupKind::None);
  CHECK_THAT(g.why, Catch::Contains("cannot be read through strides"));
  interp::Traces fused = interp::run_passes(in, {t}, {"fuse"}, {}, nullptr);
  std::string printed = interp::print_traces(fused);
  INFO(printed);
  CHECK_THAT(printed, Catch::Contains("[r] = fusion0(x)"));  // the transposed, merged value is written
  CHECK_THAT(printed, Catch::Contains("= fusion1(r)"));      // and the slice reads it
}

TEST_CASE("NVRTC compiles the attention mask's conversions, every mask dtype into every additive one", "[codegen][nvrtc]") {
  std::string why;
  auto nvrtc = codegen::Nvrtc::load(&why);
  INFO(why);
  REQUIRE(nvrtc);
  for (ir::DType m : {ir::DType::b8, ir::DType::f32, ir::DType::f64, ir::DType::bf16, ir::DType::f16})
    for (ir::DType o : {ir::DType::f32, ir::DType::f64, ir::DType::bf16, ir::DType::f16}) {
      codegen::AttentionKernel k = codegen::attention_mask_kernel(m, o);
      INFO(rt::dtype_name(m) << " -> " << rt::dtype_name(o));
      auto r = nvrtc->compile(k.source, "tr_kernel", "sm_90", codegen::Emit::cubin);
      INFO(r.log);
      CHECK(r.ok);
    }
}


TEST_CASE("the vector path needs aligned pointers only where it reads or writes 16 bytes at a time", "[codegen]") {
  // An optimizer's update reads one-element coefficients (views at 8-byte offsets into one f64
  // tensor) an element at a time: they must not send the kernel down its scalar path. A bias
  // broadcast over rows is read a vector at a time: it must be aligned (KernelParam::vector).
  SourceManager sm;
  interp::Interpreter in{sm};
  DiagnosticList diags;
  auto m = in.load("m.trace", R"(
def f(p: bf16[64, 32], g: bf16[64, 32], bias: bf16[32], k: f64[9]):
    lr = prims.slice(k, [1], [2])
    p32 = prims.convert_element_type(p, float32)
    u = prims.add(prims.mul(prims.convert_element_type(g, float32), lr), prims.convert_element_type(bias, float32))
    return prims.convert_element_type(prims.sub(p32, u), bfloat16)
)",
                   diags);
  REQUIRE(m);
  auto t = in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
  interp::Traces fused = interp::run_passes(in, {t}, {"fuse"}, {}, nullptr);
  const ir::Stmt* group = nullptr;
  for (const ir::Stmt& s : fused[0]->stmts)
    if (s.kind == ir::StmtKind::Fusion && s.outputs[0]->type.shape == ir::Shape{64, 32}) group = &s;
  REQUIRE(group);
  codegen::Kernel k = codegen::generate_elementwise(*group, "u", {});
  std::map<std::string, bool> vector;
  for (const codegen::KernelParam& q : k.params) vector[q.name] = q.vector;
  INFO(k.source);
  CHECK(vector.at("bias"));  // read as rows, 16 bytes at a time
  CHECK_FALSE(vector.at("p"));  // full size: the launcher checks it by its size
  for (const auto& [name, v] : vector)
    if (name != "bias") CHECK_FALSE(v);
  std::vector<const ir::Stmt*> members{group, group};
  codegen::Kernel h = codegen::generate_elementwise_multi(members, "h", {{}, {}}, 132);
  size_t rows = 0;
  for (const codegen::KernelParam& q : h.params) rows += q.vector;
  CHECK(rows == 2);
}

// An optimizer's trace: many independent updates of a few shapes, far more statements than the
// 64-256 fuse places at a time, so that pieces (and, where the peak stops a piece, prefixes)
// must be cut. Every cut falls between updates: no fusion reads another's output but the
// one-element coefficients, and the fused program computes what the unfused one does.
TEST_CASE("fuse cuts long runs of updates between them, never through one", "[codegen][fuse]") {
  SourceManager sm;
  interp::Interpreter in{sm};
  DiagnosticList diags;
  std::string params, body, outs;
  const char* types[] = {"f32[33]", "bf16[7, 5]", "f32[7, 5]", "bf16[33]"};
  const int n = 46;  // 13 statements each: about 600 in one run
  for (int i = 0; i < n; ++i) {
    const std::string t = types[(i / 11) % 4], j = std::to_string(i);
    params += "p" + j + ": " + t + ", g" + j + ": " + t + ", m" + j + ": " + t + ", ";
    body += "    a" + j + " = prims.convert_element_type(p" + j + ", float32)\n"
            "    b" + j + " = prims.convert_element_type(g" + j + ", float32)\n"
            "    c" + j + " = k_b1 * prims.convert_element_type(m" + j + ", float32) + k_ob1 * b" + j + "\n"
            "    d" + j + " = a" + j + " - k_lr * (c" + j + " / (sqrt(abs(c" + j + ")) + k_eps))\n"
            "    outs.append(prims.convert_element_type(d" + j + ", p" + j + ".dtype))\n"
            "    outs.append(prims.convert_element_type(c" + j + ", m" + j + ".dtype))\n";
  }
  std::string src = "def f(" + params + "k: f32[4]):\n"
                    "    k_lr, k_b1, k_ob1, k_eps = k[0], k[1], k[2], k[3]\n    outs = []\n" + body + "    return outs\n";
  auto m = in.load("m.trace", src, diags);
  REQUIRE(m);
  auto t = in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
  interp::Traces fused = interp::run_passes(in, {t}, {"fuse"}, {}, nullptr);
  std::unordered_map<const ir::Proxy*, size_t> made_by;  // fusion outputs: by fusion
  size_t fusions = 0, written = 0;
  for (const ir::Stmt& s : fused[0]->stmts) {
    if (s.kind != ir::StmtKind::Fusion) continue;
    ++fusions;
    for (const ir::Arg& a : s.args)
      ir::for_each_proxy(a, [&](const ir::ProxyPtr& p) {
        INFO(ir::print_stmt_line(s) << " reads " << p->name);
        CHECK((!made_by.count(p.get()) || rt::numel(p->type.shape) == 1));
      });
    for (const auto& o : s.outputs) made_by[o.get()] = fusions;
    written += s.outputs.size();
  }
  CHECK(fusions >= 4);  // (at least one per shape and dtype)
  CHECK(written <= static_cast<size_t>(2 * n) + 8);  // the updates, and the coefficients at most
  std::vector<rt::Tensor> inputs;
  for (const auto& p : t->inputs) inputs.push_back(rt::uniform_philox(p->type.shape, 0.5, 2.0, p->type.dtype, 5, inputs.size(), nullptr));
  auto run = [&](const ir::Trace& tr) {
    ir::ExecContext ctx;
    std::vector<rt::Tensor> copies;
    for (const auto& x : inputs) copies.push_back(rt::cast(x, x.dtype(), nullptr));
    return ir::execute(tr, std::move(copies), ctx);
  };
  ir::Arg plain = run(*t), fast = run(*fused[0]);
  REQUIRE(plain.items.size() == static_cast<size_t>(2 * n));
  REQUIRE(fast.items.size() == plain.items.size());
  for (size_t j = 0; j < plain.items.size(); ++j) {
    const rt::Tensor &x = plain.items[j].tensor, &y = fast.items[j].tensor;
    REQUIRE(x.dtype() == y.dtype());
    for (int64_t e = 0; e < rt::numel(x.shape()); e += 4) CHECK(x.get(e) == y.get(e));
  }
}

// A run whose statements form independent computations becomes one fusion per computation
// (fuse's _components): statements stay together where one reads what another defines or both
// read one input of more than one element; inputs of one element join nothing. Each part is then
// one kernel with the registers of one computation (a horizontal kernel on the GPU), not one
// kernel that holds them all at once.
TEST_CASE("fuse makes independent computations separate fusions, joined only through shared tensors", "[codegen][fuse]") {
  SourceManager sm;
  interp::Interpreter in{sm};
  DiagnosticList diags;
  auto m = in.load("m.trace",
                   "def f(a: f32[5, 7], b: bf16[5, 7], c: f32[5, 7], k: f32[2], s: f32[1]):\n"
                   "    k0, k1 = k[0], k[1]\n"
                   "    x = (a * k0 + 1.0) * s\n"          // with a:
                   "    y = sqrt(abs(b.float() * k1)) * s\n"  // alone (k1, s are one element)
                   "    z = a - exp(c)\n"                 // with x, through a
                   "    w = (c * 0.5).to(bf16)\n"          // with z, through c
                   "    u = b.float() + k0\n"              // with y, through b
                   "    return x, y, z, w, u\n",
                   diags);
  REQUIRE(m);
  auto t = in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
  interp::Traces fused = interp::run_passes(in, {t}, {"fuse"}, {}, nullptr);
  std::vector<std::set<std::string>> reads_of;  // each fusion's full-size inputs
  std::vector<size_t> outs_of;
  for (const ir::Stmt& s : fused[0]->stmts) {
    if (s.kind != ir::StmtKind::Fusion || rt::numel(s.outputs[0]->type.shape) == 1) continue;
    std::set<std::string> r;
    for (const ir::Arg& a : s.args)
      ir::for_each_proxy(a, [&](const ir::ProxyPtr& p) {
        if (rt::numel(p->type.shape) > 1) r.insert(p->name);
      });
    reads_of.push_back(r);
    outs_of.push_back(s.outputs.size());
  }
  INFO(interp::print_traces(fused));
  REQUIRE(reads_of.size() == 2);
  CHECK(reads_of[0] == std::set<std::string>{"a", "c", "k"});  // (k[0] is sliced inside: the trace's first statements fuse)
  CHECK(outs_of[0] == 3);
  CHECK(reads_of[1] == std::set<std::string>{"b", "k"});  // (k[1] is sliced inside)
  CHECK(outs_of[1] == 2);
  std::vector<rt::Tensor> inputs;
  for (const auto& p : t->inputs) inputs.push_back(rt::uniform_philox(p->type.shape, -2.0, 2.0, p->type.dtype, 9, inputs.size(), nullptr));
  ir::ExecContext c1, c2;
  ir::Arg plain = ir::execute(*t, inputs, c1), fast = ir::execute(*fused[0], inputs, c2);
  REQUIRE(fast.items.size() == plain.items.size());
  for (size_t j = 0; j < plain.items.size(); ++j) {
    const rt::Tensor &x = plain.items[j].tensor, &y = fast.items[j].tensor;
    REQUIRE(x.dtype() == y.dtype());
    for (int64_t e = 0; e < rt::numel(x.shape()); ++e) CHECK(x.get(e) == y.get(e));
  }
}

}  // namespace tracer::test
