// Interpreter and Trace IR unit tests: isolation of interpreters, tracebacks, tracing rules,
// the verifier, and the CPU executor's memory behaviour.
#include <catch2/catch.hpp>

#include <thread>

#include "ir/verify.h"
#include "tests/support.h"
#include "tracer/session.h"

namespace tracer::test {

TEST_CASE("two interpreters in one process do not share state", "[interp]") {
  SourceManager sm1, sm2;
  interp::Interpreter a(sm1), b(sm2);
  std::string out_a, out_b;
  a.on_print = [&](const std::string& s) { out_a += s; };
  b.on_print = [&](const std::string& s) { out_b += s; };
  DiagnosticList d;
  REQUIRE(a.load("a", "N = 1\ndef f():\n    return N\n", d));
  REQUIRE(b.load("b", "N = 2\ndef f():\n    return N * 10\n", d));
  REQUIRE(a.load("a2", "f()\n", d) == nullptr);  // a module's globals are its own
  CHECK(d.items().at(0).message == "name 'f' is not defined");
  d.clear();
  REQUIRE(a.load("a3", "x = full((2,), 1.0)\nprint(x)\n", d));
  REQUIRE(b.load("b3", "y = uniform((3,), seed=0) if False else full((3,), 2.0)\nprint(y)\n", d));
  CHECK(out_a == "f32[2] [1, 1] sum=2\n");
  CHECK(out_b == "f32[3] [2, 2, 2] sum=6\n");
  // Each interpreter counts its own tensors: a3's x (2 floats) and b3's y (3 floats).
  CHECK(a.allocator().current_bytes() == 8);
  CHECK(b.allocator().current_bytes() == 12);
}

TEST_CASE("interpreters run in parallel threads", "[interp]") {
  // Each thread makes and drops interpreters whose scripts build lists, tuples, dicts and cycles
  // among them, so that one interpreter's cycle collection (at its end) runs while the other
  // thread's are making containers: each collects only its own heap.
  auto work = [](int k, std::string* out) {
    for (int round = 0; round < 6; ++round) {
      SourceManager sm;
      interp::Interpreter in(sm);
      in.on_print = [&](const std::string& s) { *out += s; };
      DiagnosticList d;
      in.load("t",
              "s = 0\nkeep = []\nfor i in range(3000):\n    a = [i, (i, [i])]\n    a.append(a)\n"
              "    d = {'l': [a]}\n    d['d'] = d\n    keep.append((i,))\n    s += i * " +
                  std::to_string(k) + "\nprint(s, len(keep))\n",
              d);
      if (!d.items().empty()) *out += d.items()[0].message;
    }
  };
  std::string o1, o2;
  std::thread t1(work, 1, &o1), t2(work, 2, &o2);
  t1.join();
  t2.join();
  std::string want1, want2;
  for (int i = 0; i < 6; ++i) {
    want1 += "4498500 3000\n";
    want2 += "8997000 3000\n";
  }
  CHECK(o1 == want1);
  CHECK(o2 == want2);
}

TEST_CASE("an interpreter's cycle collection leaves other heaps alone", "[interp][robustness]") {
  using interp::Value;
  interp::ContainerHeap mine, other;
  Value theirs;
  {
    interp::HeapScope scope(other);
    theirs = interp::make<interp::ListObj>();  // a cycle, but in the other heap
    theirs.as<interp::ListObj>()->items.push_back(theirs);
  }
  {
    interp::HeapScope scope(mine);
    Value a = interp::make<interp::ListObj>();
    a.as<interp::ListObj>()->items.push_back(a);
  }
  CHECK(mine.size() == 1);
  CHECK(mine.collect_cycles() == 1);
  CHECK(mine.size() == 0);
  CHECK(theirs.as<interp::ListObj>()->items.size() == 1);
  CHECK(other.size() == 1);
  Value outside = interp::make<interp::ListObj>();  // made outside every scope: in no heap
  CHECK(outside.as<interp::ListObj>()->heap == nullptr);
  CHECK(other.collect_cycles() == 0);  // theirs still holds it
  theirs = Value();
  CHECK(other.collect_cycles() == 1);
  CHECK(other.size() == 0);
}

TEST_CASE("runtime errors carry a traceback of calls", "[interp]") {
  ScriptRun r;
  run_script(r, "tb.trace", "def inner(x):\n    return x / 0\ndef outer():\n    return inner(1)\nouter()\n");
  REQUIRE_FALSE(r.ok);
  const Diagnostic& d = r.diags.items()[0];
  CHECK(d.message == "division by zero");
  CHECK(r.sm.line_col(d.loc).line == 2);
  REQUIRE(d.notes.size() == 2);
  CHECK(r.sm.line_col(d.notes[0].loc).line == 4);
  CHECK(d.notes[0].message == "in a call to 'inner' from here");
  CHECK(r.sm.line_col(d.notes[1].loc).line == 5);
  CHECK_THAT(r.rendered, Catch::Contains("tb.trace:2:12: error: division by zero") &&
                             Catch::Contains("    return x / 0\n           ^"));
}

TEST_CASE("tracing refuses data-dependent control flow and concrete tensors", "[interp][tracing]") {
  ScriptRun r;
  run_script(r, "t", "def f(x: f32[2]):\n    if x:\n        return x\n    return x\ntrace(f)\n");
  REQUIRE_FALSE(r.ok);
  CHECK_THAT(r.diags.items()[0].message, Catch::Contains("truth value of a tensor"));
  ScriptRun r2;
  run_script(r2, "t", "c = full((2,), 1.0)\ndef f(x: f32[2]):\n    return x + c\ntrace(f)\n");
  REQUIRE_FALSE(r2.ok);
  CHECK_THAT(r2.diags.items()[0].message, Catch::Contains("concrete tensor inside a traced function"));
}

TEST_CASE("the verifier catches broken traces", "[ir]") {
  ir::Trace t;
  auto x = t.new_proxy({rt::DType::f32, {2}, "cpu"});
  auto y = t.new_proxy({rt::DType::f32, {2}, "cpu"});
  t.inputs = {x};
  ir::Stmt s;
  s.op = ir::find_op("neg");
  s.callee = "prims.neg";
  s.args = {ir::Arg::of_proxy(y)};  // y is used before it is defined
  s.outputs = {x};                  // and x is defined twice
  t.stmts.push_back(s);
  t.output = ir::Arg::of_proxy(x);
  auto errs = ir::verify(t);
  REQUIRE(errs.size() >= 2);
  CHECK_THAT(errs[0].message, Catch::Contains("'t1' is used in 'prims.neg' before it is defined"));
  CHECK_THAT(errs[1].message, Catch::Contains("'t0' is defined more than once"));

  ir::Trace u;
  auto a = u.new_proxy({rt::DType::f32, {2, 3}, "cpu"});
  auto b = u.new_proxy({rt::DType::f32, {3, 3}, "cpu"});  // neg of [2, 3] is not [3, 3]
  u.inputs = {a};
  ir::Stmt n;
  n.op = ir::find_op("neg");
  n.callee = "prims.neg";
  n.args = {ir::Arg::of_proxy(a)};
  n.outputs = {b};
  u.stmts.push_back(n);
  ir::Stmt del;
  del.kind = ir::StmtKind::Del;
  del.deleted = {b};
  u.stmts.push_back(del);
  u.output = ir::Arg::of_proxy(b);  // used after del
  errs = ir::verify(u);
  REQUIRE(errs.size() == 2);
  CHECK_THAT(errs[0].message, Catch::Contains("recorded as cpu f32[3, 3] but neg gives cpu f32[2, 3]"));
  CHECK_THAT(errs[1].message, Catch::Contains("after it is deleted"));
}

TEST_CASE("executing a trace frees values at del and counts peak bytes", "[ir][memory]") {
  Session s;
  REQUIRE(s.load_string("m", R"(
def f(x: f32[1024]):
    a = x * 2.0
    b = a * 3.0
    del a
    c = b + 1.0
    del b
    return c
)"));
  auto r = s.run("f");
  INFO(s.rendered_diagnostics());
  REQUIRE(r);
  // Live at once at most: x and one buffer. Each product dies at the statement that reads it,
  // so the next result is written over it (docs/memory.md, buffer reuse); x is the caller's.
  CHECK(r->peak_bytes == 2 * 4096);
  CHECK(r->estimated_peak_bytes == r->peak_bytes);
  REQUIRE(r->outputs.size() == 1);
  CHECK(r->outputs[0].name == "c");
}

TEST_CASE("buffer reuse gives the same values and only takes buffers nobody else holds", "[ir][memory]") {
  Session s;
  REQUIRE(s.load_string("m", R"(
def f(x: f32[1024]):
    a = x * 0.0
    b = a + 2.0
    del a
    c = b * 3.0
    del b
    return c

def held(x: f32[1024]):
    a = x + 1.0
    del x
    b = a * 2.0
    r = prims.reshape(b, (32, 32))
    c = b - 1.0
    del b
    return [a, r, c]

def lazy(a: f32[256, 64], b: f32[256, 32]):
    t = prims.transpose(a, (1, 0))
    c = prims.matmul(t, b)
    del t
    u = prims.transpose(a, (1, 0))
    v = u + 0.0
    d = prims.matmul(v, b)
    return [c, d]
)"));
  auto r = s.run("f");
  INFO(s.rendered_diagnostics());
  REQUIRE(r);
  CHECK(r->outputs[0].sum == 6.0 * 1024);
  CHECK(r->peak_bytes == 2 * 4096);
  // x is the caller's (not reused although deleted); r shares b's buffer, so c needs its own.
  r = s.run("held");
  REQUIRE(r);
  CHECK(r->peak_bytes == 4 * 4096);
  CHECK(r->estimated_peak_bytes == r->peak_bytes);
  // A transpose read only by a matmul is not copied; the one the add reads is.
  r = s.run("lazy");
  REQUIRE(r);
  REQUIRE(r->outputs.size() == 2);
  CHECK(r->outputs[0].sum == Approx(r->outputs[1].sum).epsilon(1e-6));
  for (size_t i = 0; i < r->outputs[0].head.size(); ++i)
    CHECK(r->outputs[0].head[i] == Approx(r->outputs[1].head[i]).epsilon(1e-5));
  size_t in = (256 * 64 + 256 * 32) * 4, out = 64 * 32 * 4, copy = 256 * 64 * 4;
  CHECK(r->peak_bytes == in + copy + copy + 2 * out);  // u and v (c is written over neither)
  CHECK(r->estimated_peak_bytes == r->peak_bytes);
}

TEST_CASE("type comments are checked while tracing", "[tracing]") {
  Session s;
  REQUIRE(s.load_string("m", "def f(x):\n  # x: \"cpu f32[2, 3]\"\n  y = torch.neg(x)  # y: \"cpu f32[3, 2]\"\n  return y\n"));
  CHECK_FALSE(s.print("f"));
  CHECK_THAT(s.rendered_diagnostics(), Catch::Contains("type comment says 'y' is cpu f32[3, 2] but it is cpu f32[2, 3]"));
}

TEST_CASE("module-level sizes can be pinned from outside", "[interp]") {
  Session s;
  s.set("N", "3");
  REQUIRE(s.load_string("m", "N = 1000\ndef f(x: f32[N]):\n    return x\n"));
  auto p = s.print("f");
  REQUIRE(p);
  CHECK_THAT(*p, Catch::Contains("# x: \"cpu f32[3]\""));
}

TEST_CASE("integer conversions at the edges of 64 bits: Python's result, or a located error; never a wrapped number", "[interp][robustness]") {
  // Each snippet: what print() shows, or the error it must give (issue 13; UBSan probes).
  const std::vector<std::pair<std::string, std::string>> ok = {
      {"print(int(-2.7), int(2.7), round(2.5), round(3.5), round(-0.5))", "-2 2 2 4 0"},
      {"import math\nprint(math.floor(-2.5), math.ceil(-2.5), math.floor(9223372036854775807), math.ceil(-9223372036854775807 - 1))",
       "-3 -2 9223372036854775807 -9223372036854775808"},
      {"print(round(7), round(True), int('-42'), abs(-9223372036854775807))", "7 1 -42 9223372036854775807"},
      {"print(len(range(9223372036854775807)), len(range(5, -9223372036854775807 - 1, -9223372036854775807)))",
       "9223372036854775807 2"},
      {"print(9223372036854775806 in range(-9223372036854775807, 9223372036854775807, 2))", "False"},
      {"print(list(enumerate([1], 9223372036854775807)))", "[(9223372036854775807, 1)]"},
      {"print(int(9.2e18), int(-9223372036854775808.0))", "9200000000000000000 -9223372036854775808"},
      // Tensors: i64 values near 2^63 print exactly, integer sums do not wrap; slices with huge
      // steps take the first element; a zero dimension empties any shape.
      {"print(prims.full((2,), 9223372036854775807, dtype=i64))",
       "i64[2] [9223372036854775807, 9223372036854775807] sum=18446744073709551614"},
      {"print(full((4,), 1.0)[::9223372036854775807], full((4,), 1.0)[1::9223372036854775807])", "f32[1] [1] sum=1 f32[1] [1] sum=1"},
      {"print(prims.reshape(full((0,), 1.0), [4611686018427387904, 4, 0]))", "f32[4611686018427387904, 4, 0] [] sum=0"},
      {"print(full((4611686018427387904, 0), 1.0))", "f32[4611686018427387904, 0] [] sum=0"},
      {"print(prims.iota(3, start=9223372036854775805, step=1))",
       "i64[3] [9223372036854775805, 9223372036854775806, 9223372036854775807] sum=27670116110564327418"},
  };
  for (const auto& [src, want] : ok) {
    ScriptRun r;
    run_script(r, "edge.trace", src + "\n");
    INFO(src << "\n" << r.rendered);
    REQUIRE(r.ok);
    CHECK(r.output == want + "\n");
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"print(int(1e300))", "cannot convert float 1e+300 to integer: it does not fit in 64 bits"},
      {"print(int(9223372036854775808.0))", "cannot convert float 9.223372036854776e+18 to integer"},
      {"print(round(-1e300))", "cannot convert float -1e+300 to integer"},
      {"import math\nprint(math.floor(1e300))", "cannot convert float 1e+300 to integer"},
      {"import math\nprint(math.ceil(float('inf')))", "cannot convert float infinity to integer"},
      {"print(round(float('nan')))", "cannot convert float NaN to integer"},
      {"print(int(float('-inf')))", "cannot convert float infinity to integer"},
      {"print(int('99999999999999999999'))", "does not fit in 64 bits"},
      {"print(abs(-9223372036854775807 - 1))", "abs(-9223372036854775808) does not fit in 64 bits"},
      {"print(len(range(-9223372036854775807 - 1, 9223372036854775807)))", "has more than 2^63 - 1 elements"},
      {"print(list(enumerate([1, 2], 9223372036854775807)))", "counts past 2^63 - 1"},
      {"print(prims.iota(2, start=9223372036854775807, step=9223372036854775807))", "passes the 64-bit integers"},
      {"print(prims.reshape(full((4,), 1.0), [4611686018427387904, 4, 1]))", "has more than 2^63 - 1 elements"},
      {"print(full((2305843009213693952, 2), 1.0))", "tensor has more than 2^63 - 1 bytes"},
      {"print(full((4611686018427387904, 4), 1.0))", "has more than 2^63 - 1 elements"},
  };
  for (const auto& [src, want] : bad) {
    ScriptRun r;
    run_script(r, "edge.trace", src + "\n");
    INFO(src << "\n" << r.rendered);
    CHECK_FALSE(r.ok);
    CHECK_THAT(r.rendered, Catch::Contains(want) && Catch::Contains("edge.trace:"));
  }
}

TEST_CASE("cycles of lists, tuples and dicts are freed; what is still referenced stays", "[interp][robustness]") {
  using interp::Value;
  interp::ContainerHeap heap;
  interp::HeapScope scope(heap);
  // A list holding itself, and a dict and a list holding each other, referenced from nowhere.
  {
    Value a = interp::make<interp::ListObj>();
    a.as<interp::ListObj>()->items.push_back(a);
    Value d = interp::make<interp::DictObj>();
    Value l = interp::make<interp::ListObj>(std::vector<Value>{d});
    d.as<interp::DictObj>()->set(interp::str_value("l"), l);
  }
  // A list holding itself that a live value still holds, and a tuple inside it.
  Value kept = interp::make<interp::ListObj>();
  kept.as<interp::ListObj>()->items.push_back(kept);
  kept.as<interp::ListObj>()->items.push_back(interp::make<interp::TupleObj>(std::vector<Value>{Value::integer(7)}));
  CHECK(heap.collect_cycles() == 3);
  REQUIRE(kept.as<interp::ListObj>()->items.size() == 2);
  CHECK(kept.as<interp::ListObj>()->items[0].obj() == kept.obj());
  CHECK(interp::repr(kept) == "[[...], (7,)]");
  CHECK(heap.collect_cycles() == 0);
  kept.as<interp::ListObj>()->items.clear();
}

TEST_CASE("string formatting refuses what Python refuses, with Python's words and a location", "[interp][format]") {
  // (The outputs of what it accepts: tests/lang/format.trace, against CPython's.)
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\"%d\" % \"x\"", "%d format: a real number is required, not str"},
      {"\"%d %d\" % (1,)", "not enough arguments for format string"},
      {"\"%d\" % (1, 2)", "not all arguments converted during string formatting"},
      {"\"{:d}\".format(1.5)", "Unknown format code 'd' for object of type 'float'"},
      {"\"{:+s}\".format(\"x\")", "Sign not allowed in string format specifier"},
      {"\"{} {0}\".format(1, 2)", "cannot switch from automatic field numbering to manual field specification"},
      {"\"{2}\".format(1)", "Replacement index 2 out of range"},
      {"\"{x}\".format(y=1)", "no argument named 'x'"},
      {"\"%z\" % 1", "unsupported format character 'z' (0x7a) at index 1"},
      {"\"{:=5}\".format(\"x\")", "'=' alignment not allowed in string format specifier"},
      {"\"{\".format(1)", "expected '}' before end of string"},
      {"\"}\".format(1)", "single '}' encountered in format string"},
      {"\"{:.2d}\".format(3)", "Precision not allowed in integer format specifier"},
      {"\"%x\" % 1.5", "%x format: an integer is required, not float"},
      {"\"{:>6}\".format([1])", "unsupported format string passed to list.__format__"},
      {"\"%c\" % \"\"", "%c requires int or char"},
      {"format(1, 2)", "format() argument 2 must be str, not int"},
      {"\"{0.real}\".format(1)", "attribute and index fields ('0.real') are not supported"},
  };
  for (const auto& [expr, message] : cases) {
    ScriptRun r;
    run_script(r, "f.trace", "x = 1\ny = " + expr + "\n");
    INFO(expr << "\n" << r.rendered);
    REQUIRE_FALSE(r.ok);
    CHECK_THAT(r.rendered, Catch::Contains("f.trace:2:5: error: ") && Catch::Contains(message));
  }
}

TEST_CASE("outputs are named by dict keys, then returned names, then the op that made them, never twice", "[interp][outputs]") {
  auto names = [](const std::string& src, const std::vector<std::string>& passes = {}) {
    Session s;
    REQUIRE(s.load_string("m", src));
    if (!passes.empty()) REQUIRE(s.set_passes(passes));
    auto r = s.run("f");
    INFO(s.rendered_diagnostics());
    REQUIRE(r);
    std::vector<std::string> n;
    for (const auto& o : r->outputs) n.push_back(o.name);
    return n;
  };
  CHECK(names("def f(x: f32[3]):\n    y = x * 2.0\n    return y, y\n") == std::vector<std::string>{"y", "y_1"});
  // y_1 is taken by a returned value: the repeat gets y_2.
  CHECK(names("def f(x: f32[3]):\n    y = x * 2.0\n    y_1 = x + 1.0\n    return y, y_1, y\n") ==
        std::vector<std::string>{"y", "y_1", "y_2"});
  CHECK(names("def f(x: f32[3]):\n    y = x * 2.0\n    return {\"logits\": y, \"loss\": sum(y)}\n") ==
        std::vector<std::string>{"logits", "loss"});
  CHECK(names("def f(x: f32[3]):\n    return {\"a\": {\"b\": x * 2.0, \"c\": [x, 3]}, \"n\": 4}\n") ==
        std::vector<std::string>{"a.b", "a.c.0", "a.c.1", "n"});
  // Values the trace named itself are called after their op; repeats are numbered.
  CHECK(names("def f(x: f32[3]):\n    return sum(x * 2.0), x + 1.0, x + 2.0\n") == std::vector<std::string>{"sum", "add", "add_1"});
  // After grad: the loss (by its name, else "loss"), then the gradients.
  CHECK(names("def f(x: f32[3]):\n    return mean(x * x)\n", {"grad"}) == std::vector<std::string>{"loss", "grad_x"});
  CHECK(names("def f(x: f32[3]):\n    l = mean(x * x)\n    return l\n", {"grad"}) == std::vector<std::string>{"l", "grad_x"});
}

TEST_CASE("statements with several outputs print each output's type, and read back the same", "[interp][print]") {
  Session s;
  REQUIRE(s.load_string("m", "def f(q: bf16[1, 2, 8, 16], k: bf16[1, 2, 8, 16], v: bf16[1, 2, 8, 16]):\n"
                             "    o, l = prims.attention(q, k, v, True, 0.25)\n    return o, l\n"));
  auto text = s.print("f");
  REQUIRE(text);
  CHECK_THAT(*text, Catch::Contains("o, l = prims.attention(q, k, v, True, 0.25)  # o: \"cpu bf16[1, 2, 8, 16]\", l: \"cpu f32[1, 2, 8]\""));
  Session again;
  REQUIRE(again.load_string("printed", *text));
  auto text2 = again.print("f");
  INFO(again.rendered_diagnostics());
  REQUIRE(text2);
  CHECK(text2->substr(text2->find("def f")) == text->substr(text->find("def f")));
}

TEST_CASE("deep recursion's traceback collapses the repeated calls", "[interp][errors]") {
  ScriptRun r;
  run_script(r, "rec.trace", "def f(n):\n    return f(n + 1)\nf(0)\n");
  REQUIRE_FALSE(r.ok);
  const Diagnostic& d = r.diags.items()[0];
  CHECK(d.message == "maximum recursion depth (200) exceeded");
  // Three of the repeated frame, the count, then the call from the top level.
  REQUIRE(d.notes.size() == 5);
  CHECK(d.notes[2].message == "in a call to 'f' from here");
  CHECK(d.notes[3].message == "the call above repeated 196 more times");
  CHECK(r.sm.line_col(d.notes[4].loc).line == 3);
  // f calls g calls f: the pair of calls repeats.
  ScriptRun r2;
  run_script(r2, "rec2.trace", "def f(n):\n    return g(n + 1)\ndef g(n):\n    return f(n)\nf(0)\n");
  REQUIRE_FALSE(r2.ok);
  const Diagnostic& d2 = r2.diags.items()[0];
  CHECK(d2.notes.size() <= 9);
  bool counted = false;
  for (const auto& n : d2.notes) counted = counted || n.message.find("the 2 calls above repeated") == 0;
  CHECK(counted);
  // A short traceback stays whole.
  ScriptRun r3;
  run_script(r3, "tb.trace", "def inner(x):\n    return x / 0\ndef outer():\n    return inner(1)\nouter()\n");
  CHECK(r3.diags.items()[0].notes.size() == 2);
}

TEST_CASE("random integer inputs used as targets or indices are drawn below what they index", "[interp][inputs]") {
  const std::string src = R"(
def f(x: f32[64, 5], t: i64[64], w: bf16[7, 3], i: i64[8, 8], v: f32[3, 2], r: i64[4, 4], k: i64[256]):
    ce = cross_entropy(x, t)
    e = embedding(i, w)
    g = prims.take(v, prims.reshape(r, (16,)))
    return prims.amax(t, (0,)), prims.amax(i, (0, 1)), prims.amax(r, (0, 1)), prims.amax(k, (0,)), prims.amin(t, (0,)), ce, e, g
)";
  // t: 5 classes; i: 7 rows of w; r through a reshape: 3 rows of v; k: no index use, [0, 16).
  for (uint64_t seed : {0u, 1u, 7u}) {
    SessionOptions o;
    o.seed = seed;
    Session s(o);
    REQUIRE(s.load_string("m", src));
    auto rep = s.run("f");
    INFO(s.rendered_diagnostics());
    REQUIRE(rep);
    CHECK(rep->outputs[0].sum <= 4);   // t < 5
    CHECK(rep->outputs[1].sum <= 6);   // i < 7
    CHECK(rep->outputs[2].sum <= 2);   // r < 3
    CHECK(rep->outputs[3].sum >= 7);   // k: 256 draws in [0, 16) reach past the bounds above
    CHECK(rep->outputs[3].sum <= 15);
    CHECK(rep->outputs[4].sum >= 0);
    CHECK(rep->outputs[0].sum >= 2);   // 64 draws cover more than one class
  }
}

TEST_CASE("help shows signatures with their defaults, prims' parameters and every pass's doc", "[interp][help]") {
  Session s;
  auto h = s.help("linear");
  REQUIRE(h);
  CHECK(h->rfind("linear(a, w, bias=None)\n", 0) == 0);
  auto p = s.help("prims.sum");
  REQUIRE(p);
  CHECK(p->rfind("prims.sum(a, dims, keepdim=False, dtype=None)\n", 0) == 0);
  auto o = s.help("optim.adamw");
  REQUIRE(o);
  CHECK(o->rfind("optim.adamw(lr, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.01, decay=None, state_dtype=None)\n", 0) == 0);
  auto v = s.help("value_and_grad");
  REQUIRE(v);
  CHECK_THAT(*v, Catch::Contains("argnums=0, has_aux=False"));
  for (const std::string& pass : {"grad", "remat", "checkpoint", "philox", "fuse", "fuse_reorder", "cse", "dce", "del_last_used"}) {
    auto d = s.help(pass);
    INFO(pass);
    REQUIRE(d);
    CHECK_THAT(*d, Catch::Contains("pass " + pass + "(traces"));
    CHECK(d->size() > pass.size() + 30);  // a line of doc after the signature
  }
}

}  // namespace tracer::test

