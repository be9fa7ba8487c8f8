// Parser front end: expression precedence, literals, slices, comprehensions, and every statement
// form, checked through compact S-expression dumps of the AST.
#include <catch2/catch.hpp>

#include "parse_helpers.h"

using namespace tracer;
using namespace tracer::parse::testing;
using ast::ExprKind;
using ast::StmtKind;

namespace {

// Parses a program that must have no errors and returns its dump.
std::string program(const std::string& text) {
  auto p = parse_text(text);
  INFO(p->rendered());
  CHECK_FALSE(p->diags.has_errors());
  return dump(p->module->body);
}

const ast::Expr& value_of(const Parsed& p) { return *p.module->body.at(0)->value; }

}  // namespace

TEST_CASE("operator precedence and associativity", "[parser][expr]") {
  CHECK(expr_of("-x**2") == "(Neg (Pow x 2))");
  CHECK(expr_of("2**-1") == "(Pow 2 (Neg 1))");
  CHECK(expr_of("a**b**c") == "(Pow a (Pow b c))");
  CHECK(expr_of("-a**-b*c") == "(Mul (Neg (Pow a (Neg b))) c)");
  CHECK(expr_of("a - b - c") == "(Sub (Sub a b) c)");
  CHECK(expr_of("a + b * c") == "(Add a (Mul b c))");
  CHECK(expr_of("a * b @ c // d % e / f") == "(Div (Mod (FloorDiv (MatMul (Mul a b) c) d) e) f)");
  CHECK(expr_of("a | b ^ c & d << e + f") == "(BitOr a (BitXor b (BitAnd c (LShift d (Add e f)))))");
  CHECK(expr_of("a >> b - c") == "(RShift a (Sub b c))");
  CHECK(expr_of("~x + -y") == "(Add (Invert x) (Neg y))");
  CHECK(expr_of("+-x") == "(Pos (Neg x))");
  CHECK(expr_of("not a == b") == "(Not (Compare a Eq b))");
  CHECK(expr_of("a or b and not c") == "(Or a (And b (Not c)))");
  CHECK(expr_of("a or b or c") == "(Or a b c)");
  CHECK(expr_of("a and b and c or d") == "(Or (And a b c) d)");
  CHECK(expr_of("a if b else c if d else e") == "(IfExp a b (IfExp c d e))");
  CHECK(expr_of("a + 1 if b or c else d") == "(IfExp (Add a 1) (Or b c) d)");
  CHECK(expr_of("lambda: 0") == "(Lambda () 0)");
  CHECK(expr_of("lambda x, y=1, *a, **k: x + y") == "(Lambda (x y=1 *a **k) (Add x y))");
  CHECK(expr_of("-x.y[0](z)") == "(Neg (Call (Sub (Attr x y) 0) z))");
  CHECK(expr_of("(a + b) * c") == "(Mul (Add a b) c)");
}

TEST_CASE("chained comparisons", "[parser][expr]") {
  CHECK(expr_of("a < b <= c != d") == "(Compare a Lt b Le c Ne d)");
  CHECK(expr_of("a > b >= c == d") == "(Compare a Gt b Ge c Eq d)");
  CHECK(expr_of("a not in b is not c") == "(Compare a NotIn b IsNot c)");
  CHECK(expr_of("a in b is c") == "(Compare a In b Is c)");
  CHECK(expr_of("(a < b) < c") == "(Compare (Compare a Lt b) Lt c)");
  CHECK(expr_of("a + 1 < b * 2") == "(Compare (Add a 1) Lt (Mul b 2))");
}

TEST_CASE("number literals", "[parser][literal]") {
  CHECK(expr_of("0x1F, 0b101, 1_000, 0o17, 0, 9223372036854775807") ==
        "(Tuple 31 5 1000 15 0 9223372036854775807)");
  auto floats = parse_text("x = 1.0, 1e-5, .5, 1., 2E3, 1_0.5, 0e0\n");
  REQUIRE_FALSE(floats->diags.has_errors());
  std::vector<double> values;
  for (const auto& e : value_of(*floats).items) {
    CHECK(e->kind == ExprKind::Float);
    values.push_back(e->float_value);
  }
  CHECK(values == std::vector<double>{1.0, 1e-5, 0.5, 1.0, 2000.0, 10.5, 0.0});
  CHECK(expr_of("9223372036854775808") == "error: 1:5: integer literal too large");
}

TEST_CASE("string literals", "[parser][literal]") {
  auto str = [](const std::string& literal) {
    auto p = parse_text("x = " + literal + "\n");
    INFO(p->rendered());
    REQUIRE_FALSE(p->diags.has_errors());
    REQUIRE(value_of(*p).kind == ExprKind::Str);
    return value_of(*p).str_value;
  };
  CHECK(str("'single'") == "single");
  CHECK(str("\"a\\tb\\nc\\\\d\\'e\\\"f\"") == "a\tb\nc\\d'e\"f");
  CHECK(str("'\\x41\\u00e9\\U0001F600'") == "A\xC3\xA9\xF0\x9F\x98\x80");
  CHECK(str("r'\\n\\d'") == "\\n\\d");
  CHECK(str("'a' \"b\" 'c'") == "abc");
  CHECK(str("\"\"\"one\ntwo \"quoted\" \"\"\"") == "one\ntwo \"quoted\" ");
  CHECK(str("'''x\\\ny'''") == "xy");
  CHECK(str("'\\q'") == "\\q");
  CHECK(str("''") == "");
  CHECK(str("'caf\xC3\xA9'") == "caf\xC3\xA9");
  CHECK(expr_of("'\\x4'") == "error: 1:5: truncated \\x escape");
}

TEST_CASE("atoms and displays", "[parser][expr]") {
  CHECK(expr_of("(), (a,), (a), [1, 2,], []") == "(Tuple (Tuple) (Tuple a) a (List 1 2) (List))");
  CHECK(expr_of("{'a': 1, b: [c], }") == "(Dict \"a\":1 b:(List c))");
  CHECK(expr_of("{}") == "(Dict)");
  CHECK(expr_of("..., True, False, None") == "(Tuple ... True False None)");
  CHECK(expr_of("[*a, b]") == "(List (Star a) b)");
}

TEST_CASE("subscripts and slices", "[parser][expr]") {
  CHECK(expr_of("x[1:2, ::2]") == "(Sub x (Tuple (Slice 1 2 _) (Slice _ _ 2)))");
  CHECK(expr_of("x[..., 0]") == "(Sub x (Tuple ... 0))");
  CHECK(expr_of("x[:]") == "(Sub x (Slice _ _ _))");
  CHECK(expr_of("x[a:]") == "(Sub x (Slice a _ _))");
  CHECK(expr_of("x[:-1:]") == "(Sub x (Slice _ (Neg 1) _))");
  CHECK(expr_of("x[a:b:c]") == "(Sub x (Slice a b c))");
  CHECK(expr_of("x[1]") == "(Sub x 1)");
  CHECK(expr_of("x[1,]") == "(Sub x (Tuple 1))");
  CHECK(expr_of("bf16[8192, 4096]") == "(Sub bf16 (Tuple 8192 4096))");
}

TEST_CASE("comprehensions and calls", "[parser][expr]") {
  CHECK(expr_of("[e for x in xs if c for y in ys]") == "(ListComp e (for x xs (if c)) (for y ys))");
  CHECK(expr_of("[a for a, b in pairs if a if b]") == "(ListComp a (for (Tuple a b) pairs (if a) (if b)))");
  CHECK(expr_of("[x if c else y for x in z]") == "(ListComp (IfExp x c y) (for x z))");
  CHECK(expr_of("sum(x * 2 for x in xs)") == "(Call sum (ListComp (Mul x 2) (for x xs)))");
  CHECK(expr_of("(x for x in xs)") == "(ListComp x (for x xs))");
  CHECK(expr_of("f(a, *b, c=1, **d)") == "(Call f a (Star b) c=1 **d)");
  CHECK(expr_of("f(a,)(b)") == "(Call (Call f a) b)");
  CHECK(expr_of("torch.nn.functional.linear(x, w, None)") ==
        "(Call (Attr (Attr (Attr torch nn) functional) linear) x w None)");
}

TEST_CASE("assignment forms", "[parser][stmt]") {
  CHECK(program("a = b = c\n") == "assign a = b = c\n");
  CHECK(program("a, b = f(x)\n") == "assign (Tuple a b) = (Call f x)\n");
  CHECK(program("[a, b] = f(x)\n") == "assign (List a b) = (Call f x)\n");
  CHECK(program("a, = t\n") == "assign (Tuple a) = t\n");
  CHECK(program("a, *rest = t\n") == "assign (Tuple a (Star rest)) = t\n");
  CHECK(program("x.y[0] = 1\n") == "assign (Sub (Attr x y) 0) = 1\n");
  CHECK(program("C0, \\\n  _, \\\n  = saved\n") == "assign (Tuple C0 _) = saved\n");
  CHECK(program("x: int = 5\ny: bf16[2, 3]\n") == "ann x = int 5\nann y = (Sub bf16 (Tuple 2 3))\n");
  CHECK(program("x += 1\nx -= 1\nx *= 1\nx /= 1\nx //= 1\nx %= 1\nx **= 1\nx @= 1\nx &= 1\nx |= 1\nx ^= 1\n") ==
        "aug Add x = 1\naug Sub x = 1\naug Mul x = 1\naug Div x = 1\naug FloorDiv x = 1\naug Mod x = 1\n"
        "aug Pow x = 1\naug MatMul x = 1\naug BitAnd x = 1\naug BitOr x = 1\naug BitXor x = 1\n");
  CHECK(program("a = 1; b = 2;\n") == "assign a = 1\nassign b = 2\n");
}

TEST_CASE("simple statements", "[parser][stmt]") {
  CHECK(program("del a, b[0], c.d\ndel (e, f)\n") == "del a (Sub b 0) (Attr c d)\ndel (Tuple e f)\n");
  CHECK(program("pass\nreturn\nreturn a, b\nreturn (a)\n") == "pass\nreturn\nreturn (Tuple a b)\nreturn a\n");
  CHECK(program("raise\nraise E(1)\n") == "raise\nraise (Call E 1)\n");
  CHECK(program("assert x\nassert x, 'msg'\n") == "assert x\nassert x \"msg\"\n");
  CHECK(program("global a, b\nnonlocal c\n") == "global a b\nnonlocal c\n");
  CHECK(program("import torch\nimport a.b.c as d, e\n") == "import torch\nimport a.b.c as d e\n");
  CHECK(program("from a.b import x as y, z\nfrom . import x\nfrom ..p import (q,)\nfrom m import *\n") ==
        "from a.b import x as y z\nfrom . import x\nfrom ..p import q\nfrom m import *\n");
}

TEST_CASE("compound statements", "[parser][stmt]") {
  CHECK(program("if a:\n  x = 1\nelif b:\n  x = 2\nelif c: x = 3\nelse:\n  x = 4\n") ==
        "if a\n  assign x = 1\nelse\n  if b\n    assign x = 2\n  else\n    if c\n      assign x = 3\n"
        "    else\n      assign x = 4\n");
  CHECK(program("for i, j in pairs:\n  break\nwhile x < 3:\n  continue\n") ==
        "for (Tuple i j) in pairs\n  break\nwhile (Compare x Lt 3)\n  continue\n");
  CHECK(program("with checkpoint():\n  y = f(x)\nwith open(p) as f, g() as (a, b):\n  pass\n") ==
        "with (Call checkpoint)\n  assign y = (Call f x)\nwith (Call open p) as f\n  with (Call g) as (Tuple a b)\n"
        "    pass\n");
  CHECK(program("if a:\n  if b:\n    pass\n\n\n  c = 1\n") == "if a\n  if b\n    pass\n  assign c = 1\n");
}

TEST_CASE("function definitions", "[parser][stmt]") {
  CHECK(program("def f(a, b: int = 1, *args, c, d=2, **kw) -> T:\n  return a\n") ==
        "def f(a b:int=1 *args c d=2 **kw) -> T\n  return a\n");
  CHECK(program("def g(*, k, **rest): pass\n") == "def g(* k **rest)\n  pass\n");
  CHECK(program("def mlp(x: bf16[8192, 4096], w: bf16[11008, 4096]) -> bf16[8192, 11008]:\n  return x\n") ==
        "def mlp(x:(Sub bf16 (Tuple 8192 4096)) w:(Sub bf16 (Tuple 11008 4096))) -> (Sub bf16 (Tuple 8192 11008))\n"
        "  return x\n");
  CHECK(program("@torch.no_grad()\n@no_autocast\n@no_autocast()\ndef f(x,):\n  pass\n") ==
        "def f(x) @(Call (Attr torch no_grad)) @no_autocast @(Call no_autocast)\n  pass\n");
  CHECK(program("def outer():\n  def inner(y):\n    return y\n  return inner\n") ==
        "def outer()\n  def inner(y)\n    return y\n  return inner\n");
}

TEST_CASE("layout: continuation, brackets, tabs, CRLF, no final newline", "[parser][lexer]") {
  CHECK(program("x = f(a,\n      b,\n  c)\ny = [\n1,\n]\n") == "assign x = (Call f a b c)\nassign y = (List 1)\n");
  CHECK(program("x = 1 + \\\n    2\n") == "assign x = (Add 1 2)\n");
  CHECK(program("if a:\r\n  b = 1\r\nc = 2\r\n") == "if a\n  assign b = 1\nassign c = 2\n");
  CHECK(program("if a:\n\tb = 1\n\tc = 2\n") == "if a\n  assign b = 1\n  assign c = 2\n");
  CHECK(program("def f():\n  return 1") == "def f()\n  return 1\n");
  CHECK(program("x = 1  # trailing words\n\n   # indented comment\n\ny = 2\n") == "assign x = 1\nassign y = 2\n");
  CHECK(program("") == "");
  CHECK(program("# only a comment") == "");
  CHECK(program("\n\n   \n") == "");
}

TEST_CASE("locations are byte offsets spanning the node", "[parser][loc]") {
  auto p = parse_text("s = 'h\xC3\xA9llo'; y = a.b(c) + 1\nif y:\n  z = -y ** 2\n");
  REQUIRE_FALSE(p->diags.has_errors());
  const auto& body = p->module->body;
  CHECK(p->text_at(body[0]->loc) == "s = 'h\xC3\xA9llo'");
  CHECK(p->text_at(body[1]->loc) == "y = a.b(c) + 1");
  CHECK(p->text_at(body[1]->targets[0]->loc) == "y");
  CHECK(p->text_at(body[1]->value->loc) == "a.b(c) + 1");
  CHECK(p->text_at(body[1]->value->items[0]->loc) == "a.b(c)");
  CHECK(p->text_at(body[1]->value->items[0]->items[0]->loc) == "a.b");
  CHECK(p->sm.line_col(body[1]->loc).col == 15);  // bytes, not code points
  CHECK(p->text_at(body[2]->loc) == "if y:");
  CHECK(p->text_at(body[2]->body[0]->value->loc) == "-y ** 2");
  CHECK(p->text_at(body[2]->body[0]->value->items[0]->loc) == "y ** 2");
}
