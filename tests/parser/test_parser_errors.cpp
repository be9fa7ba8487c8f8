// Parser front end: syntax errors are reported at the right line:col, one per broken statement
// without cascades, the rest of the file still parses, and no input makes the parser crash.
#include <catch2/catch.hpp>

#include <random>

#include "parse_helpers.h"

using namespace tracer;
using namespace tracer::parse::testing;

namespace {

std::vector<std::string> errors_of(const std::string& text) { return parse_text(text)->errors(); }

// Parses anything; the test passes when this returns (no crash, no hang, no exception).
void survives(const std::string& text) {
  auto p = parse_text(text);
  CHECK(p->module != nullptr);
  for (const auto& d : p->diags.items()) CHECK(d.loc.offset <= text.size());
  (void)p->rendered();
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_CASE("several errors in one file, each at its place, no cascades", "[parser][errors]") {
  auto p = parse_text(
      "def f(x):\n"
      "  y = x +\n"
      "  if x y:\n"
      "    pass\n"
      "  z = (1, 2]\n"
      "  w = 3\n"
      "  return w\n"
      "x = )\n"
      "for i in range(3)\n"
      "  print(i)\n"
      "print('ok')\n");
  CHECK(p->errors() == std::vector<std::string>{
                           "2:10: expected an expression",
                           "3:8: expected ':' after 'if' condition",
                           "5:12: closing ']' does not match opening '('",
                           "8:5: expected an expression",
                           "9:18: expected ':' after 'for' clause",
                       });
  // Good statements survive, inside the function too.
  CHECK(dump(p->module->body) == "def f(x)\n  assign w = 3\n  return w\nexpr (Call print \"ok\")\n");
}

TEST_CASE("error messages", "[parser][errors]") {
  CHECK(errors_of("f(a b)\n") == std::vector<std::string>{"1:5: expected ',' or ')'"});
  CHECK(errors_of("import\n") == std::vector<std::string>{"1:7: expected a name"});
  CHECK(errors_of("from x\n") == std::vector<std::string>{"1:7: expected 'import'"});
  CHECK(errors_of("foo bar\n") == std::vector<std::string>{"1:5: unexpected 'bar'"});
  CHECK(errors_of("else:\n  pass\nx = 1\n") == std::vector<std::string>{"1:1: unexpected 'else'"});
  CHECK(errors_of("def f()\n  pass\n") == std::vector<std::string>{"1:8: expected ':' after function signature"});
  CHECK(errors_of("while x\n  pass\n") == std::vector<std::string>{"1:8: expected ':' after 'while' condition"});
  CHECK(errors_of("if x:\ny = 1\n") == std::vector<std::string>{"2:1: expected an indented block"});
  CHECK(errors_of("if x:") == std::vector<std::string>{"1:6: expected an indented block"});
  CHECK(errors_of("x = 1\n    y = 2\nz = 3\n") == std::vector<std::string>{"2:5: unexpected indent"});
  CHECK(errors_of("if a:\n    b = 1\n  c = 2\n") ==
        std::vector<std::string>{"3:3: unindent does not match any outer indentation level"});
  CHECK(errors_of("x = $\n") == std::vector<std::string>{"1:5: invalid character '$'"});
  CHECK(errors_of("s = 'abc\n") == std::vector<std::string>{"1:5: unterminated string literal"});
  CHECK(errors_of("s = '''abc\n\nx = 1\n") ==
        std::vector<std::string>{"1:5: unterminated triple-quoted string literal"});
  CHECK(errors_of("x = f(1,\ny = 2\n") == std::vector<std::string>{"1:6: '(' was never closed"});
  CHECK(errors_of("1 = x\n") == std::vector<std::string>{"1:1: cannot assign to literal"});
  CHECK(errors_of("f() = x\n") == std::vector<std::string>{"1:1: cannot assign to function call"});
  CHECK(errors_of("f(x=1, y)\n") == std::vector<std::string>{"1:8: positional argument follows keyword argument"});
  CHECK(errors_of("def f(a=1, b): pass\n") ==
        std::vector<std::string>{"1:12: parameter without a default follows a parameter with a default"});
  CHECK(errors_of("x = 1 if y\n") == std::vector<std::string>{"1:11: expected 'else'"});
  CHECK(errors_of("if a b:\n  x\nelif c:\n  y\nelse:\n  z\n") ==
        std::vector<std::string>{"1:6: expected ':' after 'if' condition"});
  CHECK(errors_of("if a:\nelse:\n  z\n") == std::vector<std::string>{"2:1: expected an indented block"});
}

TEST_CASE("one error per logical line; later lines still checked", "[parser][errors]") {
  CHECK(errors_of("x = ) + $\ny = ]\nz = 1\n") ==
        std::vector<std::string>{"1:5: expected an expression", "2:5: expected an expression"});
  CHECK(errors_of("x = ) + $ + (\ny = ]\nz = 1\n") == std::vector<std::string>{"1:5: expected an expression"});
  CHECK(errors_of("x = (1 +\n  $)\nw = = 2\n") ==
        std::vector<std::string>{"2:3: invalid character '$'", "3:5: expected an expression"});
  // An error inside a nested block leaves the enclosing blocks intact.
  auto p = parse_text("def f():\n  if a:\n    b = = 1\n    c = 2\n  d = 3\ne = 4\n");
  CHECK(p->errors() == std::vector<std::string>{"3:9: expected an expression"});
  CHECK(dump(p->module->body) == "def f()\n  if a\n    assign c = 2\n  assign d = 3\nassign e = 4\n");
  // A broken header skips its block, and the next statement at that level parses.
  auto q = parse_text("def f(x) y:\n  x = = 1\n  y = 2\nz = 3\n");
  CHECK(q->errors().size() == 1);
  CHECK(dump(q->module->body) == "assign z = 3\n");
}

TEST_CASE("deep nesting is an error, not a crash", "[parser][errors][limits]") {
  CHECK(errors_of("x = " + repeat("(", 150) + "1" + repeat(")", 150) + "\n").empty());
  auto deep = errors_of("x = " + repeat("(", 5000) + "1" + repeat(")", 5000) + "\ny = 1\n");
  REQUIRE(deep.size() == 1);
  CHECK(deep[0].find("nested too deeply") != std::string::npos);
  CHECK(errors_of("x = " + repeat("-", 100000) + "1\n").size() == 1);
  CHECK(errors_of("x = " + repeat("not ", 50000) + "1\n").size() == 1);
  CHECK(errors_of("x = " + repeat("[", 20000) + "\n").size() == 1);
  CHECK(errors_of("x = 1" + repeat(" ** 2", 20000) + "\n").size() == 1);
  CHECK(errors_of("x = " + repeat("lambda: ", 20000) + "1\n").size() == 1);
  CHECK(errors_of("x = [" + repeat("-1, ", 20000) + "]\n").empty());
  CHECK(errors_of("x = 1" + repeat(" + 1", 3000) + "\n").empty());
  std::string blocks;
  for (int i = 0; i < 150; ++i) blocks += std::string(i, ' ') + "if x:\n";
  blocks += std::string(150, ' ') + "pass\n";
  CHECK(errors_of(blocks).size() == 1);
}

TEST_CASE("garbage input never crashes", "[parser][errors][fuzz]") {
  survives("");
  survives("\n");
  survives(std::string("\0\0\0x = 1\0", 10));
  survives("\xff\xfe\xfd garbage \x80\x81\n\tx\n \t y\n");
  survives("'''");
  survives("\"");
  survives("x = '\\");
  survives("\\");
  survives("x = 1 \\");
  survives("@");
  survives("@\n@\ndef");
  survives(")))]]]}}}");
  survives("((((((((((");
  survives("def f(:\n\tif:\n\t\telse\n   \t  x\n");
  survives(repeat("    \n\t\n", 100) + "x");
  survives("if x:\n" + repeat("  y = 1\n", 10) + "      z\n   w\n");
  survives("\t if a:\n \tb\n\t\tc\n");
  survives("lambda *, **: (yield)");
  survives("x[::::, ...: ...]");
  survives("from from import import");
  survives("[t0] = nvFusion0(x)\n  # ((((\n  # t0 = \n  #\n");
  survives("[t0] = nvFusion0(x)\n  # " + repeat("(", 1000) + "\n");

  std::mt19937 rng(1234);
  const std::string seed =
      "@torch.no_grad()\ndef f(x, *a, k=1, **kw) -> T:\n  # x: \"cpu f32[2]\"\n"
      "  [t0] = nvFusion0(x)\n    # t0 = prims.neg(x)  # t0: \"f32\"\n"
      "  y = [i ** 2 for i in x if i > 0][1:2, ::3]\n  C0, \\\n  _, \\\n  = x\n"
      "  return {'a': (1, 2.5, \"s\\n\"), 'b': lambda q: -q}\n";
  const std::string alphabet = "()[]{}:,.=+-*/\\#\"' \t\n\raxyz019@%~^&|<>!?`$\x80\xff";
  for (int round = 0; round < 400; ++round) {
    std::string text = seed;
    int edits = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < edits; ++i) {
      size_t at = rng() % (text.size() + 1);
      switch (rng() % 3) {
        case 0: text.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        case 1: if (at < text.size()) text.erase(at, 1 + rng() % 4); break;
        default: if (at < text.size()) text[at] = alphabet[rng() % alphabet.size()]; break;
      }
    }
    survives(text);
  }
  for (int round = 0; round < 100; ++round) {
    std::string text;
    for (int i = 0, n = static_cast<int>(rng() % 300); i < n; ++i) text += static_cast<char>(rng() % 256);
    survives(text);
  }
}
