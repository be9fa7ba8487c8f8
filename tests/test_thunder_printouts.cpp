// Thunder's printouts as they are (issue 17, docs/thunder.md): the shared printouts parse, trace,
// round-trip and run; backward collections, RNG state calls, module prologues, DTensor ops
// and prims, dotted calls with decompositions and custom ops files, each against float64 or
// against what Thunder does.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <regex>

#include "runtime/io.h"
#include "tests/printout_support.h"
#include "tests/support.h"
#include "tracer/session.h"

namespace tracer::test {

TEST_CASE("the shared Thunder printouts parse; 01, 02, 09 and 05 (FSDP forward and backward) trace, round-trip and run; 08's unknown op is named", "[roundtrip][thunder]") {
  auto files = files_in(thunder_dir(), ".txt");
  REQUIRE(files.size() >= 5);
  for (const std::string& f : files) {
    DYNAMIC_SECTION(f) {
      Session s;
      INFO(s.rendered_diagnostics());
      CHECK(s.check_file(f, true));
      std::string base = std::filesystem::path(f).filename().string();
      if (base.rfind("01_", 0) == 0 || base.rfind("02_", 0) == 0 || base.rfind("09_", 0) == 0) {
        round_trip(f, read_file(f), "", {});
        // ... and run on random inputs, the memory estimate equal to the CPU allocator's peak.
        Session r;
        REQUIRE(r.load_file(f));
        auto e = r.entry("");
        REQUIRE(e);
        auto rep = r.run(*e);
        INFO(r.rendered_diagnostics());
        REQUIRE(rep);
        auto m = r.memory(*e);
        REQUIRE(m);
        CHECK(rep->peak_bytes == m->peak_bytes);
      }
      // 08 calls a user's op printed without its decomposition: check names it, at its first use.
      if (base.rfind("08_", 0) == 0) {
        Session c;
        CHECK_FALSE(c.check_file(f, false));
        CHECK_THAT(c.rendered_diagnostics(), Catch::Contains("name 'unsloth_apply_rope_backward' is not defined"));
      }
      // 05: the FSDP forward's gathers and waits (its group's size, 2, from the printout's types);
      // its backward's collections are typed by what the forward saves.
      if (base.rfind("05_", 0) == 0) {
        CHECK(s.check_file(f, false));
        round_trip(f, read_file(f), "augmented_forward_fn", {});
        round_trip(f, read_file(f), "backward_fn", {});
      }
    }
  }
}

TEST_CASE("a backward printout's collections, typed by the comments after their unpacking, give float64's gradients", "[thunder]") {
  // tests/thunder/backward_collections.txt: C0 = (a, w, t1) with t1 = tanh(a @ w), C1 = (f2, i3)
  // numbers the trace uses (0.5, 5); its gradients are t12 = t8 @ w^T and a^T @ t8 with
  // t8 = t4 * f2 * (1 - t1^2).
  const std::string dir = fresh_dir("tracer_backward_collections");
  const int64_t m = 3, k = 4, n = 5;
  std::map<std::string, rt::Tensor> in = {{"a", sine_tensor({m, k}, 0.7)}, {"w", sine_tensor({k, n}, 1.3)}, {"t1", sine_tensor({m, n}, 0.4)},
                                          {"t4", sine_tensor({m, n}, 2.1)}};
  Session s;
  give_inputs(s, dir, in);
  REQUIRE(s.load_file(source_dir() + "/tests/thunder/backward_collections.txt"));
  auto r = s.run("backward_fn", dir + "/out");
  INFO(s.rendered_diagnostics());
  REQUIRE(r);
  std::vector<double> t8(m * n);
  for (int64_t i = 0; i < m * n; ++i) t8[i] = in["t4"].get(i) * 0.5 * (1 - in["t1"].get(i) * in["t1"].get(i));
  rt::Tensor ga = rt::read_npy(dir + "/out/t12.npy"), gw = rt::read_npy(dir + "/out/t10.npy");
  REQUIRE(ga.shape() == rt::Shape{m, k});
  REQUIRE(gw.shape() == rt::Shape{k, n});
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) {
      double acc = 0;
      for (int64_t x = 0; x < n; ++x) acc += t8[i * n + x] * in["w"].get(j * n + x);
      worst = std::max(worst, std::fabs(ga.get(i * k + j) - acc));
    }
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t x = 0; x < m; ++x) acc += in["a"].get(x * k + i) * t8[x * n + j];
      worst = std::max(worst, std::fabs(gw.get(i * n + j) - acc));
    }
  CHECK(worst < 1e-6);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a printout's source comments are kept on the statement they head, through passes", "[thunder]") {
  Session s;
  REQUIRE(s.load_file(source_dir() + "/tests/thunder/source_comments.txt"));
  for (const std::vector<std::string>& passes : {std::vector<std::string>{}, {"del_last_used"}, {"fuse", "del_last_used"}}) {
    INFO(passes.size());
    REQUIRE(s.set_passes(passes));
    auto p = s.print("computation");
    INFO(s.rendered_diagnostics());
    REQUIRE(p);
    size_t a = p->find("  # /home/user/model.py:21: \t        h = self.fc(x)\n");
    size_t b = p->find("  # /home/user/model.py:22: \t        return torch.tanh(h) * 2.0\n");
    CHECK(a != std::string::npos);
    CHECK(b != std::string::npos);
    CHECK(a < b);
  }
}

namespace {

// n runs of entry in one session (its generator going on from run to run).
std::vector<RunReport> run_times(Session& s, const std::string& entry, int n) {
  std::vector<RunReport> runs;
  for (int k = 0; k < n; ++k) {
    auto r = s.run(entry);
    INFO(s.rendered_diagnostics());
    REQUIRE(r);
    runs.push_back(*r);
  }
  return runs;
}

const OutputInfo& out(const RunReport& r, const std::string& name) {
  for (const auto& o : r.outputs)
    if (o.name == name) return o;
  FAIL("no output " << name);
  return r.outputs.front();
}

}  // namespace

// tests/thunder/rng_state_mid2024.txt: Thunder's RNG executor (mid-2024 on) reads and advances the
// generator in one call, get_and_update_rng_state_impl(None, None, devices.Device(...)), and the
// fusion draws with uniform_philox(seed=i0, offset=i1); `import thunder.core.devices as devices`
// is our devices. Each run draws the next numbers: the offset advances by one, the draws differ,
// and they stay within [0, 1) of the input they scale.
TEST_CASE("a printout's RNG state calls advance the generator run to run", "[thunder]") {
  Session s;
  REQUIRE(s.load_file(source_dir() + "/tests/thunder/rng_state_mid2024.txt"));
  std::vector<RunReport> runs = run_times(s, "augmented_forward_fn", 3);
  for (int k = 0; k < 3; ++k) {
    INFO(k);
    CHECK(out(runs[k], "i1").head.at(0) == out(runs[0], "i1").head.at(0) + k);
    CHECK(out(runs[k], "i0").head.at(0) == out(runs[0], "i0").head.at(0));
    const OutputInfo& a = out(runs[k], "flat_args.0");
    const OutputInfo& t = out(runs[k], "flat_output.0");
    REQUIRE(a.head.size() == t.head.size());
    for (size_t j = 0; j < a.head.size(); ++j) {
      CHECK(std::abs(t.head[j]) <= std::abs(a.head[j]));
      CHECK(t.head[j] * a.head[j] >= 0);
    }
  }
  CHECK(out(runs[0], "flat_output.0").sum != out(runs[1], "flat_output.0").sum);
}

// tests/thunder/rng_state_2024.txt: the 2024 form reads the state (get_rng_state_prim_impl, u8[16]
// printed as "cpu ui8[16]"), unpacks a seed and offset ("int" comments on what tracer holds as 0-d
// tensors), draws with them, packs the offset advanced by 16 and sets it. Run to run the offset
// goes 0, 16, 32 and the masks differ; dce keeps the set, whose output nothing reads.
// Three runs of a 2024 RNG-state printout: the seed stays, the offset goes 0, step, 2 * step, and
// the dropout masks differ run to run.
static void check_rng_offsets(Session& s, const std::string& file, double step) {
  REQUIRE(s.load_file(source_dir() + "/tests/thunder/" + file));
  std::vector<RunReport> runs = run_times(s, "augmented_forward_fn", 3);
  for (int k = 0; k < 3; ++k) {
    INFO(k);
    CHECK(out(runs[k], "i2").head.at(0) == step * k);
    CHECK(out(runs[k], "i1").head.at(0) == out(runs[0], "i1").head.at(0));
  }
  CHECK(out(runs[0], "t5").summary != out(runs[1], "t5").summary);
  CHECK(out(runs[1], "t5").summary != out(runs[2], "t5").summary);
}

TEST_CASE("a 2024 printout's get, unpack, pack and set of the RNG state thread the generator through runs", "[thunder]") {
  Session s;
  check_rng_offsets(s, "rng_state_2024.txt", 16.0);
  REQUIRE(s.set_passes({"dce", "del_last_used"}));
  auto text = s.print("augmented_forward_fn");
  INFO(s.rendered_diagnostics());
  REQUIRE(text);
  CHECK(text->find("prims.set_rng_state(") != std::string::npos);
}

// tests/thunder/rng_state_update_2024.txt: the same with update_rng_state_prim_impl (PR 264 of
// lightning-thunder: the offset advanced by 4, nvFuser's step, and packed into the state).
TEST_CASE("a 2024 printout's update_rng_state_prim_impl advances the offset by 4 a run", "[thunder]") {
  Session s;
  check_rng_offsets(s, "rng_state_update_2024.txt", 4.0);
}

TEST_CASE("the generator's state ops refuse what is not a state", "[thunder][diagnostics]") {
  Session s;
  REQUIRE(s.load_string("r.trace", "def f(x: u8[8]):\n    return prims.set_rng_state(x)\n"));
  CHECK_FALSE(s.run("f"));
  CHECK_THAT(s.rendered_diagnostics(), Catch::Contains("must be the generator's state, a u8[16] tensor (seed and offset), got cpu u8[8]"));
  Session t;
  REQUIRE(t.load_string("r.trace", "def f(x: f32[2]):\n    return prims.pack_rng_state(x, 3)\n"));
  CHECK_FALSE(t.run("f"));
  CHECK_THAT(t.rendered_diagnostics(), Catch::Contains("argument 'seed' must be an int or a 0-d integer tensor"));
  // philox would move a stateful draw before the set: it refuses the trace.
  Session u;
  REQUIRE(u.set_passes({"philox"}));
  REQUIRE(u.load_string("r.trace", "def f(x: f32[4]):\n    prims.set_rng_state(prims.get_rng_state())\n    return x * uniform((4,), 0.0, 1.0)\n"));
  CHECK_FALSE(u.run("f"));
  CHECK_THAT(u.rendered_diagnostics(), Catch::Contains("philox: the trace sets the generator's state"));
}

TEST_CASE("a convolution's backward as Thunder prints it (interior padding, regrouped flipped weights, swapped stride and dilation) gives the gradients by definition", "[thunder]") {
  // tests/thunder/conv2d_backward.txt: Thunder's rule for conv2d(a [2, 4, 7, 6], w [6, 2, 3, 3],
  // stride 2, padding 1, groups 2) with the torch executor's names. Its three gradients against
  // sums over every (output, kernel offset) pair in float64.
  const std::string dir = fresh_dir("tracer_conv2d_backward");
  const int64_t N = 2, C = 4, H = 7, W = 6, O = 6, G = 2, K = 3, OH = 4, OW = 3, S = 2, P = 1;
  const int64_t cg = C / G, og = O / G;
  std::map<std::string, rt::Tensor> in = {{"a", sine_tensor({N, C, H, W}, 0.7)}, {"w", sine_tensor({O, cg, K, K}, 1.3)},
                                          {"t9", sine_tensor({N, O, OH, OW}, 2.1)}};
  Session s;
  give_inputs(s, dir, in);
  REQUIRE(s.load_file(source_dir() + "/tests/thunder/conv2d_backward.txt"));
  auto r = s.run("backward_fn", dir + "/out");
  INFO(s.rendered_diagnostics());
  REQUIRE(r);
  auto at = [](const rt::Tensor& t, std::initializer_list<int64_t> idx) {
    int64_t lin = 0, k = 0;
    for (int64_t i : idx) lin = lin * t.shape()[k++] + i;
    return t.get(lin);
  };
  std::vector<double> da(N * C * H * W, 0.0), dw(O * cg * K * K, 0.0), db(O, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t x = 0; x < OW; ++x) {
          double g = at(in["t9"], {n, o, y, x});
          db[o] += g;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < K; ++i)
              for (int64_t j = 0; j < K; ++j) {
                int64_t h = y * S - P + i, v = x * S - P + j, ci = (o / og) * cg + c;
                if (h < 0 || h >= H || v < 0 || v >= W) continue;
                da[((n * C + ci) * H + h) * W + v] += g * at(in["w"], {o, c, i, j});
                dw[((o * cg + c) * K + i) * K + j] += g * at(in["a"], {n, ci, h, v});
              }
        }
  rt::Tensor ga = rt::read_npy(dir + "/out/t17.npy"), gw = rt::read_npy(dir + "/out/t25.npy"), gb = rt::read_npy(dir + "/out/t26.npy");
  REQUIRE(ga.shape() == rt::Shape{N, C, H, W});
  REQUIRE(gw.shape() == rt::Shape{O, cg, K, K});
  REQUIRE(gb.shape() == rt::Shape{O});
  double worst = 0;
  for (int64_t i = 0; i < ga.numel(); ++i) worst = std::max(worst, std::fabs(ga.get(i) - da[i]));
  for (int64_t i = 0; i < gw.numel(); ++i) worst = std::max(worst, std::fabs(gw.get(i) - dw[i]));
  for (int64_t i = 0; i < gb.numel(); ++i) worst = std::max(worst, std::fabs(gb.get(i) - db[i]));
  CHECK(worst < 1e-5);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a backward printout's collections hold what they were given until they are cleared, as Thunder's memory tool counts", "[thunder][memory]") {
  // backward_collections.txt clears (clear_mutable_collection) and deletes its collections right
  // after unpacking them, so each saved tensor dies at its own del; backward_collections_held.txt
  // never does, so they all live to the end. Inputs from the collections are the trace's (moved
  // in), not the caller's: the CPU allocator's measured peak is the estimate in both.
  std::map<std::string, size_t> peak;
  for (const char* f : {"backward_collections.txt", "backward_collections_held.txt"}) {
    INFO(f);
    Session s;
    REQUIRE(s.load_file(source_dir() + "/tests/thunder/" + f));
    auto r = s.run("backward_fn");
    INFO(s.rendered_diagnostics());
    REQUIRE(r);
    auto m = s.memory("backward_fn");
    REQUIRE(m);
    CHECK(m->peak_bytes == r->estimated_peak_bytes);
    CHECK(r->peak_bytes == r->estimated_peak_bytes);
    peak[f] = r->peak_bytes;
  }
  // Held: a (48 B), w (80), t1 (60) and t4 (60) stay live beside the peak's intermediates.
  CHECK(peak["backward_collections.txt"] == 308);
  CHECK(peak["backward_collections_held.txt"] == 516);
}

// tests/thunder/prologue_module_params.txt: the prologue of a module's call reads the module
// (`fn = globals()['__function_obj']`, `obj = thunder.core.module.get_thunder_module(fn)`) and
// its parameters and buffer (`obj.get_parameter('0.weight')`, `get_buffer('2.scale')`): they are
// the prologue's inputs after `args`, named as the prologue names them, given from files here.
// The prologue hands them on unchanged; the computation they feed, (tanh(x W0^T + b0) W2^T) * s,
// matches float64.
TEST_CASE("a module's prologue reads its parameters and buffers as inputs, and its computation uses them", "[thunder]") {
  const std::string dir = fresh_dir("tracer_module_prologue");
  auto tensor = sine_tensor;
  std::map<std::string, rt::Tensor> in = {{"x", tensor({3, 5}, 0.7)},
                                          {"t_0_weight", tensor({7, 5}, 1.3)},
                                          {"t_0_bias", tensor({7}, 0.4)},
                                          {"t_2_weight", tensor({2, 7}, 2.1)},
                                          {"t_2_scale", tensor({2}, 0.9)}};
  const std::string file = source_dir() + "/tests/thunder/prologue_module_params.txt";
  Session p;
  give_inputs(p, dir, in);
  REQUIRE(p.load_file(file));
  auto r = p.run("prologue", dir + "/pro");
  INFO(p.rendered_diagnostics());
  REQUIRE(r);
  std::vector<std::string> names;
  for (const InputInfo& i : r->inputs) {
    names.push_back(i.name);
    CHECK(i.source != "random");
  }
  CHECK(names == std::vector<std::string>{"x", "t_0_bias", "t_0_weight", "t_2_weight", "t_2_scale"});
  Session c;
  for (const auto& [name, t] : in) {
    rt::Tensor o = rt::read_npy(dir + "/pro/" + name + ".npy");
    REQUIRE(o.shape() == t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) REQUIRE(o.get(i) == t.get(i));
    REQUIRE(c.add_input(name, dir + "/pro/" + name + ".npy"));
  }
  REQUIRE(c.load_file(file));
  auto rc = c.run("computation", dir + "/out");
  INFO(c.rendered_diagnostics());
  REQUIRE(rc);
  rt::Tensor t3 = rt::read_npy(dir + "/out/t3.npy");
  REQUIRE(t3.shape() == rt::Shape{3, 2});
  double worst = 0;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      double acc = 0;
      for (int64_t h = 0; h < 7; ++h) {
        double z = in["t_0_bias"].get(h);
        for (int64_t k = 0; k < 5; ++k) z += in["x"].get(i * 5 + k) * in["t_0_weight"].get(h * 5 + k);
        acc += std::tanh(z) * in["t_2_weight"].get(j * 7 + h);
      }
      worst = std::max(worst, std::fabs(t3.get(i * 2 + j) - acc * in["t_2_scale"].get(j)));
    }
  CHECK(worst < 1e-5);
  std::filesystem::remove_all(dir);
}

// A parameter read without a type names itself; a module read outside a prologue's trace, or of a
// name the module lacks, is a KeyError that says what the module has.
TEST_CASE("a module's prologue: an untyped parameter and unknown names are clear errors", "[thunder]") {
  const std::string head =
      "import thunder\n"
      "def prologue(*args, **kwargs):\n"
      "  x: \"cpu f32[2]\" = args[0]\n"
      "  fn = globals()['__function_obj']\n"
      "  obj = thunder.core.module.get_thunder_module(fn)\n";
  {
    Session s;
    REQUIRE(s.load_string("untyped.txt", head + "  w = obj.get_parameter('lin.weight')\n  return ((x, w), ())\n"));
    CHECK_FALSE(s.run("prologue"));
    CHECK_THAT(s.rendered_diagnostics(), Catch::Contains("element 'w' of the collection 'the module's parameters' of 'prologue' has no tensor type"));
    CHECK_THAT(s.rendered_diagnostics(), Catch::Contains("--type w=f32[2, 3]"));
  }
  {
    Session s;
    REQUIRE(s.load_string("typed.txt", head + "  w = obj.get_parameter('lin.weight')\n  # w: \"cpu f32[3, 2]\"\n  return ((x, w), ())\n"));
    auto r = s.run("prologue");
    INFO(s.rendered_diagnostics());
    REQUIRE(r);
    REQUIRE(r->outputs.size() == 2);
    CHECK(r->outputs[1].shape == std::vector<int64_t>{3, 2});
  }
  {
    std::string printed;
    SessionOptions so;
    so.print = [&](const std::string& t) { printed += t; };
    Session s(so);
    CHECK_FALSE(s.load_string("eager.trace",
                              "m = ThunderModule({'lin.weight': tensor([1.0, 2.0])}, {})\n"
                              "print(m.get_submodule('lin').get_parameter('weight').tolist())\n"
                              "m.get_parameter('lin.bias')\n"));
    CHECK(printed == "[1.0, 2.0]\n");
    CHECK_THAT(s.rendered_diagnostics(), Catch::Contains("KeyError: the module has no parameter 'lin.bias' (it has 'lin.weight')"));
  }
  {
    Session s;
    CHECK_FALSE(s.load_string("noglobal.trace", "fn = globals()['__function_obj']\n"));
    CHECK_THAT(s.rendered_diagnostics(), Catch::Contains("__function_obj"));
  }
}

// tests/thunder/dtensor_backward.txt: a backward whose cotangent is a DTensor sharded on dim 1
// over a mesh of 3 ranks (global [4, 10]: pieces of 4, 4 and 2 columns, torch.chunk's sizes). Its
// input is the local tensor, typed where the printout unwraps it; construct_dtensor wraps the
// result back after checking it is this rank's piece. On rank 1 the gradient is tanh(t5) * t0's
// local tensor (float64 on the same data); on rank 2 the piece is [4, 2], which the printout (made
// on rank 0) does not have: the error says so.
TEST_CASE("a DTensor printout runs on its local tensors; construct_dtensor checks this rank's piece", "[thunder]") {
  const std::string dir = fresh_dir("tracer_dtensor");
  auto tensor = sine_tensor;
  std::map<std::string, rt::Tensor> in = {{"t0", tensor({4, 4}, 0.3)}, {"t5", tensor({4, 4}, 1.7)}};
  const std::string file = source_dir() + "/tests/thunder/dtensor_backward.txt";
  Session s(as_rank(3, 1));
  give_inputs(s, dir, in);
  REQUIRE(s.load_file(file));
  auto r = s.run("backward_fn", dir + "/out");
  INFO(s.rendered_diagnostics());
  REQUIRE(r);
  rt::Tensor g = rt::read_npy(dir + "/out/rank1/bw_t3.npy");  // each rank writes below its own directory
  REQUIRE(g.shape() == rt::Shape{4, 4});
  double worst = 0;
  for (int64_t i = 0; i < 16; ++i) worst = std::max(worst, std::fabs(g.get(i) - std::tanh(in["t5"].get(i)) * in["t0"].get(i)));
  CHECK(worst < 1e-6);
  // The memory timeline holds local tensors (64 bytes each, not the global 160): its peak is the
  // two inputs, as the CPU allocator measured.
  auto m = s.memory("backward_fn");
  REQUIRE(m);
  CHECK(m->peak_bytes == 2 * 64);
  CHECK(r->peak_bytes == m->peak_bytes);
  std::filesystem::remove_all(dir);

  check_fails_as_rank(file, "backward_fn", 3, 2,
                      "construct_dtensor: the local tensor has shape (4, 4) but rank 2's piece of (4, 10) placed (Shard(dim=1),) on [0, 1, 2] is (4, 2)");
}

// tests/thunder/dtensor_ops.txt: DTensor ops (dtensor_add with alpha, dtensor_mul, a cast) printed
// with their decompositions, which run: each unwraps its DTensors, applies ATen's op to the local
// tensors (aten_add is ltorch's add; aten__to_copy, which tracer does not have, runs its own
// printed decomposition) and wraps the result back. Global f32[5, 7] sharded on dim 1 over 3 ranks
// (pieces of 3, 3 and 1 columns): on rank 1 the outputs are (a + 2b) * a and its bf16 cast
// (float64 on the same data); on rank 2 the printout's [5, 3] is not that rank's piece.
TEST_CASE("DTensor ops printed with their decompositions run on local tensors", "[thunder]") {
  const std::string dir = fresh_dir("tracer_dtensor_ops");
  auto tensor = sine_tensor;
  std::map<std::string, rt::Tensor> in = {{"l_a_", tensor({5, 3}, 0.4)}, {"l_b_", tensor({5, 3}, 2.1)}};
  const std::string file = source_dir() + "/tests/thunder/dtensor_ops.txt";
  std::vector<rt::Tensor> outs = run_as_rank(file, "computation", 3, 1, dir, in);
  REQUIRE(outs.size() == 2);
  const rt::Tensor &mul = outs[0], &to = outs[1];
  REQUIRE(mul.shape() == rt::Shape{5, 3});
  REQUIRE(to.shape() == rt::Shape{5, 3});
  CHECK(to.dtype() == rt::DType::bf16);
  double worst = 0, worst_bf16 = 0;
  for (int64_t i = 0; i < 15; ++i) {
    double a = in["l_a_"].get(i), b = in["l_b_"].get(i), want = (a + 2 * b) * a;
    worst = std::max(worst, std::fabs(mul.get(i) - want));
    worst_bf16 = std::max(worst_bf16, std::fabs(to.get(i) - want) / std::max(1.0, std::fabs(want)));
  }
  CHECK(worst < 1e-5);
  CHECK(worst_bf16 < 1.0 / 128);
  std::filesystem::remove_all(dir);

  check_fails_as_rank(file, "computation", 3, 2,
                      "construct_dtensor: the local tensor has shape (5, 3) but rank 2's piece of (5, 7) placed (Shard(dim=1),) on [0, 1, 2] is (5, 1)");
}

// tests/thunder/dtensor_prims.txt: an execution trace's DTensor prims (dtensor_mul_prim, ...), with no
// decomposition and no local types: --type gives this rank's pieces ([3, 4] of [6, 4] on rank 1 of
// 2); the ops act on them: bf16(exp(x * w) + x) against float64. Pieces of different shapes would
// need a redistribution, which is refused by name.
TEST_CASE("DTensor prims of an execution trace act on the local tensors of one placement", "[thunder]") {
  const std::string dir = fresh_dir("tracer_dtensor_prims");
  auto tensor = sine_tensor;
  std::map<std::string, rt::Tensor> in = {{"l_x_", tensor({3, 4}, 0.2)}, {"l_w_", tensor({3, 4}, 1.3)}};
  const std::string file = source_dir() + "/tests/thunder/dtensor_prims.txt";
  {
    std::vector<rt::Tensor> outs = run_as_rank(file, "computation", 2, 1, dir, in);
    REQUIRE(outs.size() == 1);
    const rt::Tensor& y = outs[0];
    REQUIRE(y.shape() == rt::Shape{3, 4});
    CHECK(y.dtype() == rt::DType::bf16);
    double worst = 0;
    for (int64_t i = 0; i < 12; ++i) {
      double x = in["l_x_"].get(i), w = in["l_w_"].get(i), want = std::exp(x * w) + x;
      worst = std::max(worst, std::fabs(y.get(i) - want) / std::max(1.0, std::fabs(want)));
    }
    CHECK(worst < 1.0 / 128);
  }
  run_fails_as_rank(file, "computation", 2, 1, {{"l_x_", "f32[3, 4]"}, {"l_w_", "f32[6, 2]"}},
                    "dtensor_mul_prim: DTensors placed Shard(dim=0) and Shard(dim=1) need a redistribution first");
  std::filesystem::remove_all(dir);
}

// tests/thunder/dtensor_tp_prims.txt: a tensor-parallel MLP's execution trace. The prims place their
// results as PyTorch's sharding propagation does, from the inputs' pieces (--type gives them): on
// rank 1 of 2, x replicated [4, 6], w1 sharded on its rows (colwise) [4, 6] of [8, 6], its bias
// [4] of [8], w2 sharded on its columns (rowwise) [5, 4] of [5, 8], s replicated [5]. The first
// linear is sharded on its last dimension, reshaped to [4, 2, 4] and back (the shard follows),
// the second linear is a Partial sum, multiplied by s broadcast (replicated): this rank's
// partial, -(x w1_r^T + b1_r) w2_r^T * s, against float64. Uneven pieces (3 ranks: 3, 3 and 2
// features) cannot be reshaped to [4, 2, 4] and a replicated weight cannot contract a sharded
// input: both refused by name.
TEST_CASE("DTensor linear, reshape and broadcast prims place their results as PyTorch's sharding propagation", "[thunder]") {
  const std::string dir = fresh_dir("tracer_dtensor_tp");
  const std::string file = source_dir() + "/tests/thunder/dtensor_tp_prims.txt";
  std::map<std::string, rt::Tensor> in = {{"l_x_", sine_tensor({4, 6}, 0.3)},  {"l_w1_", sine_tensor({4, 6}, 0.7)},
                                          {"l_b1_", sine_tensor({4}, 1.1)},     {"l_w2_", sine_tensor({5, 4}, 1.9)},
                                          {"l_s_", sine_tensor({5}, 2.3)}};
  {
    std::vector<rt::Tensor> outs = run_as_rank(file, "computation", 2, 1, dir, in);
    REQUIRE(outs.size() == 1);
    const rt::Tensor& y = outs[0];
    REQUIRE(y.shape() == rt::Shape{4, 5});
    double worst = 0;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t o = 0; o < 5; ++o) {
        double acc = 0;
        for (int64_t k = 0; k < 4; ++k) {
          double h = in["l_b1_"].get(k);
          for (int64_t j = 0; j < 6; ++j) h += in["l_x_"].get(i * 6 + j) * in["l_w1_"].get(k * 6 + j);
          acc += -h * in["l_w2_"].get(o * 4 + k);
        }
        worst = std::max(worst, std::fabs(y.get(i * 5 + o) - acc * in["l_s_"].get(o)));
      }
    CHECK(worst < 1e-5);
  }
  run_fails_as_rank(file, "computation", 3, 2,
                    {{"l_x_", "f32[4, 6]"}, {"l_w1_", "f32[2, 6]"}, {"l_b1_", "f32[2]"}, {"l_w2_", "f32[5, 2]"}, {"l_s_", "f32[5]"}},
                    "dtensor_reshape_prim: rank 2's piece (4, 2) of (4, 8) sharded on dimension 1, which is not a piece of (4, 2, 4) "
                    "sharded on dimension 1 (4, 0, 4), need a redistribution first");
  run_fails_as_rank(file, "computation", 2, 1,
                    {{"l_x_", "f32[4, 3]"}, {"l_w1_", "f32[8, 6]"}, {"l_b1_", "f32[8]"}, {"l_w2_", "f32[5, 4]"}, {"l_s_", "f32[5]"}},
                    "dtensor_linear_prim: an input placed Shard(dim=1), a weight placed Replicate() and a bias placed Replicate() "
                    "need a redistribution first");
  std::filesystem::remove_all(dir);
}

// tests/thunder/dtensor_grouped_mm.txt: a mixture of experts' grouped product of DTensors on rank
// 1 of 2, as Thunder's DTensor test places it: tokens a [6, 8] and experts' weights b [3, 8, 5]
// both sharded on the contraction (rank 1 holds a[:, 4:8] and b[:, 4:8, :]), the offsets (group
// ends 2, 5, 6: groups of 2, 3 and 1 rows) replicated: a Partial sum, this rank's share of every
// group's product, against float64. colwise: a replicated, b sharded on its outputs (5 over 2
// ranks: rank 1 holds columns 3:5) gives a result sharded on its last dimension. Tokens sharded
// by rows (which would split groups) and offsets that are sharded are refused by name.
TEST_CASE("DTensor grouped products place their results as PyTorch's strategy for _grouped_mm", "[thunder]") {
  const std::string dir = fresh_dir("tracer_dtensor_gmm");
  const std::string file = source_dir() + "/tests/thunder/dtensor_grouped_mm.txt";
  rt::Tensor offs = rt::Tensor::empty(rt::DType::i32, {3});
  const int64_t ends[3] = {2, 5, 6};
  for (int64_t g = 0; g < 3; ++g) offs.set(g, double(ends[g]));
  auto group_of = [&](int64_t row) {
    int64_t g = 0;
    while (g < 3 && row >= ends[g]) ++g;
    return g;
  };
  auto check = [&](const rt::Tensor& y, const rt::Tensor& a, const rt::Tensor& b, int64_t K, int64_t N, double sign) {
    REQUIRE(y.shape() == rt::Shape{6, N});
    double worst = 0;
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        const int64_t g = group_of(i);
        for (int64_t k = 0; k < K; ++k) acc += a.get(i * K + k) * b.get((g * K + k) * N + n);
        worst = std::max(worst, std::fabs(y.get(i * N + n) - sign * acc));
      }
    CHECK(worst < 1e-5);
  };
  {
    std::map<std::string, rt::Tensor> in = {{"l_a_", sine_tensor({6, 4}, 0.3)}, {"l_b_", sine_tensor({3, 4, 5}, 0.7)}, {"l_offs_", offs}};
    std::vector<rt::Tensor> outs = run_as_rank(file, "computation", 2, 1, dir, in);
    REQUIRE(outs.size() == 1);
    check(outs[0], in["l_a_"], in["l_b_"], 4, 5, 1.0);
  }
  {
    std::map<std::string, rt::Tensor> in = {{"l_a_", sine_tensor({6, 8}, 0.3)}, {"l_b_", sine_tensor({3, 8, 2}, 0.7)}, {"l_offs_", offs}};
    std::vector<rt::Tensor> outs = run_as_rank(file, "colwise", 2, 1, dir, in);
    REQUIRE(outs.size() == 1);
    check(outs[0], in["l_a_"], in["l_b_"], 8, 2, -1.0);
  }
  run_fails_as_rank(file, "computation", 2, 1, {{"l_a_", "f32[3, 8]"}, {"l_b_", "f32[3, 8, 5]"}, {"l_offs_", "i32[3]"}},
                    "dtensor_grouped_mm_prim: a placed Shard(dim=0) and b placed Replicate() need a redistribution first");
  run_fails_as_rank(file, "computation", 3, 1, {{"l_a_", "f32[6, 8]"}, {"l_b_", "f32[3, 8, 5]"}, {"l_offs_", "i32[1]"}},
                    "dtensor_grouped_mm_prim: offsets placed Shard(dim=0) (each rank needs every group's end) need a redistribution first");
  std::filesystem::remove_all(dir);
}

// A dotted call tracer does not know (thunder.x.frobnicate), printed with its decomposition, runs
// the decomposition, whose own nested lines are the decomposition of ltorch.neg; the trace names
// the region by the callee's last name, and its print reads back to the same print.
TEST_CASE("an unknown dotted call runs its printed decomposition, level by level", "[thunder]") {
  const std::string text =
      "def computation(x):\n"
      "  # x: \"cpu f32[3]\"\n"
      "  t0 = thunder.torch.experimental.mystery.frobnicate(x)  # t0: \"cpu f32[3]\"\n"
      "    # t1 = ltorch.neg(x)  # t1: \"cpu f32[3]\"\n"
      "      # t1 = prims.neg(x)  # t1: \"cpu f32[3]\"\n"
      "    # t0 = prims.exp(t1)  # t0: \"cpu f32[3]\"\n"
      "  return t0\n";
  round_trip("dotted.txt", text, "computation", {});
  const std::string dir = fresh_dir("tracer_dotted");
  rt::Tensor x = sine_tensor({3}, 0.9);
  Session s;
  give_inputs(s, dir, {{"x", x}});
  REQUIRE(s.load_string("dotted.txt", text));
  auto p = s.print("computation");
  REQUIRE(p);
  CHECK_THAT(*p, Catch::Contains("t0 = frobnicate(x)"));
  auto r = s.run("computation", dir + "/out");
  INFO(s.rendered_diagnostics());
  REQUIRE(r);
  rt::Tensor y = rt::read_npy(dir + "/out/" + r->outputs[0].name + ".npy");
  for (int64_t i = 0; i < 3; ++i) CHECK(std::fabs(y.get(i) - std::exp(-x.get(i))) < 1e-6);
  std::filesystem::remove_all(dir);
}

// tests/cli/custom_op_user.txt calls rms_scale, a user's op Thunder printed without a definition;
// --ops (Session::add_ops_file) gives it from tests/cli/custom_ops.trace. Without the file the one
// error names the op and the option; with it the trace runs and matches float64.
TEST_CASE("a printout's custom op comes from an ops file", "[thunder]") {
  const std::string file = source_dir() + "/tests/cli/custom_op_user.txt";
  {
    Session s;
    CHECK_FALSE(s.check_file(file, false, "computation"));
    CHECK_THAT(s.rendered_diagnostics(), Catch::Contains("name 'rms_scale' is not defined: a function the program calls but does not define (a printout's custom op); give its definition with --ops FILE.trace"));
  }
  const std::string dir = fresh_dir("tracer_custom_op");
  auto tensor = sine_tensor;
  std::map<std::string, rt::Tensor> in = {{"x", tensor({3, 6}, 0.7)}, {"t_scale", tensor({6}, 1.9)}};
  Session s;
  give_inputs(s, dir, in);
  REQUIRE(s.add_ops_file(source_dir() + "/tests/cli/custom_ops.trace"));
  REQUIRE(s.load_file(file));
  auto r = s.run("computation", dir + "/out");
  INFO(s.rendered_diagnostics());
  REQUIRE(r);
  rt::Tensor y = rt::read_npy(dir + "/out/" + r->outputs[0].name + ".npy");
  REQUIRE(y.shape() == rt::Shape{3, 6});
  double worst = 0;
  for (int64_t i = 0; i < 3; ++i) {
    double ms = 0;
    for (int64_t j = 0; j < 6; ++j) ms += in["x"].get(i * 6 + j) * in["x"].get(i * 6 + j) / 6;
    for (int64_t j = 0; j < 6; ++j) {
      double want = std::tanh(in["x"].get(i * 6 + j) / std::sqrt(ms + 1e-5) * in["t_scale"].get(j));
      worst = std::max(worst, std::fabs(y.get(i * 6 + j) - want));
    }
  }
  CHECK(worst < 1e-5);
  Session none;
  CHECK_FALSE(none.add_ops_file(dir + "/missing.trace"));
  CHECK_THAT(none.rendered_diagnostics(), Catch::Contains("cannot read ops file"));
  std::filesystem::remove_all(dir);
}

// tests/thunder/dtensor_prologue.txt: a prologue's DTensor inputs (Shard(dim=0) of bf16[10, 6] over
// 4 ranks, a replicated f32[6, 5]) are checked by check_dtensor_spec_repr against the spec it
// prints: global shape, dtype and this rank's piece (3 rows on rank 0, 1 row on rank 3).
TEST_CASE("a prologue's DTensor inputs are checked against the spec it prints", "[thunder]") {
  const std::string file = source_dir() + "/tests/thunder/dtensor_prologue.txt";
  {
    Session s;
    REQUIRE(s.load_file(file));
    auto r = s.run("prologue");
    INFO(s.rendered_diagnostics());
    REQUIRE(r);
    REQUIRE(r->inputs.size() == 2);
    CHECK(r->inputs[0].shape == std::vector<int64_t>{3, 6});
    CHECK(r->inputs[0].dtype == "bf16");
    CHECK(r->inputs[1].shape == std::vector<int64_t>{6, 5});
  }
  {
    Session s;
    REQUIRE(s.set_input_type("l_a_", "bf16[4, 6]"));
    REQUIRE(s.load_file(file));
    CHECK_FALSE(s.run("prologue"));
    CHECK_THAT(s.rendered_diagnostics(), Catch::Contains("prologue check failed: the local tensor of 'l_a_' has shape (4, 6) but rank 0's piece of (10, 6) placed (Shard(dim=0),) on [0, 1, 2, 3] is (3, 6)"));
  }
  {
    Session s;
    REQUIRE(s.set_input_type("l_a_", "f32[3, 6]"));
    REQUIRE(s.load_file(file));
    CHECK_FALSE(s.run("prologue"));
    CHECK_THAT(s.rendered_diagnostics(), Catch::Contains("input 'l_a_' is cpu f32[3, 6] but it is a DTensor of bf16[10, 6]"));
  }
  {
    // Rank 3 holds one row: the spec check passes, the printout's rank-0 annotation does not.
    SessionOptions o;
    o.world_size = 4;
    o.world_rank = 3;
    Session s(o);
    REQUIRE(s.set_input_type("l_a_", "bf16[1, 6]"));
    REQUIRE(s.load_file(file));
    CHECK_FALSE(s.check_file(file, false, "prologue"));
    CHECK_THAT(s.rendered_diagnostics(), Catch::Contains("the annotation says 't1' is cuda:0 bf16[3, 6] but it is cpu bf16[1, 6]"));
  }
  {
    Session s;
    REQUIRE(s.load_string("never_unwrapped.txt",
                          "def f(x):\n"
                          "  # x: \"DTensor cuda:0 f32[8, 4]\"\n"
                          "  return x\n"));
    CHECK_FALSE(s.run("f"));
    CHECK_THAT(s.rendered_diagnostics(), Catch::Contains("'x' is a DTensor (DTensor cuda:0 f32[8, 4]) but 'f' never unwraps it"));
  }
}

}  // namespace tracer::test
