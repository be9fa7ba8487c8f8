// jit and value_and_grad: bad input gets located errors naming the argument (the values
// themselves are checked in tests/lang/compiled.trace against finite differences).
#include <catch2/catch.hpp>

#include "tests/support.h"

namespace tracer::test {

namespace {

const char* kPrelude = R"(
def loss(w, x):
    return sum(x @ w)
def vector(w, x):
    return x @ w
w = ones(3, 2, dtype=f32)
x = ones(4, 3, dtype=f32)
)";

// Runs the prelude and then `body`; returns the first error's line (in body, 1-based) and text.
std::pair<int, std::string> error_of(const std::string& body) {
  ScriptRun r;
  std::string text = std::string(kPrelude) + body;
  run_script(r, "case.trace", text);
  if (r.ok) return {0, ""};
  const Diagnostic& d = r.diags.items().front();
  int prelude_lines = 0;
  for (const char* p = kPrelude; *p; ++p) prelude_lines += *p == '\n';
  return {static_cast<int>(r.sm.line_col(d.loc).line) - prelude_lines, d.message};
}

}  // namespace

TEST_CASE("value_and_grad and jit refuse bad input with the argument named", "[compiled]") {
  struct Case {
    const char* body;
    int line;
    const char* text;
  };
  const Case cases[] = {
      {"value_and_grad(vector)(w, x)\n", 1, "grad needs a trace that returns a scalar floating-point loss"},
      {"value_and_grad(loss)(w, loss)\n", 1, "argument 'x' is a function; a compiled function takes tensors"},
      {"value_and_grad(loss)(w, {1.5: x})\n", 1, "argument 'x' is a dict with a float key"},
      {"value_and_grad(loss, argnums=1)(w, reshape(arange(12, dtype=i64), 4, 3))\n", 1,
       "argument 1 ('x') is an i64 tensor, which has no gradient"},
      {"value_and_grad(loss)({'a': [w, arange(2, dtype=i32)]}, x)\n", 1,
       "argument 0 ('w') holds 'w_a_1', an i32 tensor, which has no gradient"},
      {"value_and_grad(loss, argnums=2)(w, x)\n", 1, "argnums names argument 2, but the call passes 2 positional arguments"},
      {"value_and_grad(loss, argnums=1)(w, 3.0)\n", 1, "argument 1 ('x') holds no tensor to differentiate"},
      {"value_and_grad(loss, argnums='w')\n", 1, "argnums=...) must be an integer or a tuple of integers"},
      {"value_and_grad(loss, has_aux=1)\n", 1, "has_aux=...) is True or False"},
      {"value_and_grad(loss, has_aux=True)(w, x)\n", 1, "grad(aux=True) needs a trace that returns (loss, aux...)"},
      {"jit(loss, passes='fuse,nope')\n", 1, "no pass is named 'nope'"},
      {"jit(loss, passes='grad')\n", 1, "jit(passes=...) cannot run grad"},
      {"value_and_grad(loss, passes='del_last_used,remat')\n", 1, "pass order"},
      {"jit(loss, device='cuda')\n", 1, "compiled functions run on the CPU only so far"},
      {"jit(loss, static=1)\n", 1, "unexpected keyword argument 'static'"},
      {"jit(print)\n", 1, "f must be a function defined in the language"},
      {"jit(loss)(w)\n", 1, "missing"},
      {"g = value_and_grad(loss)\ndef h(a):\n    return g(a, x)\njit(h)(w)\n", 3,
       "cannot be called inside a traced function"},
      {"def f(a):\n    return a.item()\njit(f)(w)\n", 2, "item() needs the tensor's value, which is not known while tracing"},
      {"def f(a):\n    if a[0, 0] > 0:\n        return a\n    return a\njit(f)(w)\n", 2, "truth value of a tensor is not known while tracing"},
      {"print(float(w))\n", 1, "only a one-element tensor can be converted to a Python number, this one has 6 elements"},
      {"if w:\n    pass\n", 1, "the truth value of a tensor of 6 elements (shape [3, 2]) is ambiguous"},
  };
  for (const Case& c : cases) {
    INFO(c.body);
    auto [line, text] = error_of(c.body);
    CHECK(line == c.line);
    CHECK_THAT(text, Catch::Contains(c.text));
  }
}

TEST_CASE("a compiled function's later calls neither trace nor run passes", "[compiled]") {
  ScriptRun r;
  run_script(r, "loop.trace", std::string(kPrelude) + R"(
vg = value_and_grad(loss, passes="fuse,del_last_used")
for i in range(20):
    l, g = vg(w, x)
    w = w - 0.01 * g
print(vg.compiles, vg.calls, vg.pass_ms > 0.0, vg.trace_ms > 0.0)
t, p = vg.trace_ms, vg.pass_ms
for i in range(5):
    l, g = vg(w, x)
print(vg.trace_ms == t, vg.pass_ms == p, vg.compiles)
)");
  INFO(r.rendered);
  REQUIRE(r.ok);
  CHECK(lines(r.output) == std::vector<std::string>{"1 20 True True", "True True 1"});
}

}  // namespace tracer::test
