// The source printer (interpreter/unparse.h): every program we have, parsed, printed, parsed and
// printed again gives the same text, with no syntax error on the way, and means the same program
// (the same S-expressions); hand-written cases pin precedence, literals and Thunder's comments.
#include <catch2/catch.hpp>

#include <tuple>

#include "tests/support.h"

#include "interpreter/unparse.h"
#include "parse_helpers.h"

using namespace tracer;
using namespace tracer::parse::testing;
using namespace tracer::test;

namespace {

void round_trips(const std::string& name, const std::string& text) {
  auto a = parse_text(text, name);
  INFO(a->rendered());
  REQUIRE_FALSE(a->diags.has_errors());
  std::string p1 = ast::unparse(*a->module);
  auto b = parse_text(p1, name + " (printed)");
  INFO("printed:\n" << p1 << b->rendered());
  REQUIRE_FALSE(b->diags.has_errors());
  CHECK(dump(b->module->body) == dump(a->module->body));
  CHECK(ast::unparse(*b->module) == p1);
}

}  // namespace

TEST_CASE("unparse: every example, stdlib file, language test and printout prints back to itself", "[parser][unparse]") {
  std::vector<std::string> files;
  for (const char* dir : {"/examples", "/stdlib", "/stdlib/passes", "/tests/lang", "/tests/thunder", "/tests/cli", "/bench"})
    for (const std::string& ext : {std::string(".trace"), std::string(".txt")})
      for (const std::string& f : files_in(source_dir() + dir, ext)) files.push_back(f);
  for (const std::string& f : files_in(thunder_dir(), ".txt")) files.push_back(f);
  REQUIRE(files.size() > 40);
  for (const std::string& f : files) {
    DYNAMIC_SECTION(f) {
      std::string text = read_file(f);
      auto a = parse_text(text, f);
      if (a->diags.has_errors()) continue;  // files that test syntax errors
      round_trips(f, text);
    }
  }
}

TEST_CASE("unparse: precedence, literals, targets and Thunder's comments", "[parser][unparse]") {
  auto p = parse_text(
      "# header\n"
      "import torch\n"
      "from thunder.executors.torchex import no_autocast\n"
      "@torch.no_grad()\n"
      "def f(a, b=2.5, *args, k=None, **kw) -> None:\n"
      "  # a: \"cpu f32[2, 3]\"\n"
      "  # \"sum\"\n"
      "  x = (a + b) * -c ** 2 - (d - e) - f(*g, h=1, **i)\n"
      "  y = not (p and q) or r if s < t <= u else lambda v, w=1: v @ w\n"
      "  z = [q for q, _ in pairs if q is not None], {'k': 1e-08, \"it's\": 3.0}, (1,), x[:, 0:T, ::2]\n"
      "  t0, = z\n"
      "  (t1, (t2, _)) = g(x)\n"
      "  [t3] = nvFusion0(t1)\n"
      "    # t3 = prims.neg(t1)  # t3: \"cpu f32[2]\"\n"
      "  (t4, _) = my_op(t3)\n"
      "    # t4 = ltorch.exp(t3)\n"
      "  del [t1, t2]\n"
      "  x += 1\n"
      "  if x:\n"
      "    pass\n"
      "  elif y:\n"
      "    return 2 ** -1 + 2e308\n"
      "  else:\n"
      "    raise ValueError('no')\n"
      "  return (t3, t4)\n");
  INFO(p->rendered());
  REQUIRE_FALSE(p->diags.has_errors());
  std::string out = ast::unparse(*p->module);
  INFO(out);
  CHECK_THAT(out, Catch::Contains("x = (a + b) * -c ** 2 - (d - e) - f(*g, h=1, **i)"));
  CHECK_THAT(out, Catch::Contains("y = not (p and q) or r if s < t <= u else (lambda v, w=1: v @ w)"));
  CHECK_THAT(out, Catch::Contains("{'k': 1e-08, 'it\\'s': 3.0}, (1,), x[:, 0:T, ::2]"));
  CHECK_THAT(out, Catch::Contains("  # a: \"cpu f32[2, 3]\"\n  # \"sum\"\n"));
  CHECK_THAT(out, Catch::Contains("  t1, (t2, _) = g(x)\n"));
  CHECK_THAT(out, Catch::Contains("  [t3] = nvFusion0(t1)\n    # t3 = prims.neg(t1)  # t3: \"cpu f32[2]\"\n"));
  CHECK_THAT(out, Catch::Contains("  t4, _ = my_op(t3)\n    # t4 = ltorch.exp(t3)\n"));
  // (a literal past the largest double is infinity, printed as a literal that reads back as it)
  CHECK_THAT(out, Catch::Contains("  elif y:\n    return 2 ** -1 + 1e309\n  else:\n"));
  CHECK_THAT(out, Catch::Contains("def f(a, b=2.5, *args, k=None, **kw) -> None:"));
  round_trips("cases", out);
}

TEST_CASE("unparse: blank lines inside a block and a parenthesized return print as written", "[parser][unparse]") {
  const std::string text =
      "def computation(x):\n"
      "  # x\n"
      "  t0 = ltorch.mul(x, x)  # t0\n"
      "\n"
      "  # a note\n"
      "  t1 = t0\n"
      "\n"
      "\n"
      "  if t1:\n"
      "    a = 1\n"
      "\n"
      "    b = 2\n"
      "  return (t1,)\n"
      "\n"
      "def g(a):\n"
      "  return a, a\n";
  auto p = parse_text(text, "blank.txt");
  INFO(p->rendered());
  REQUIRE_FALSE(p->diags.has_errors());
  std::string out = ast::unparse(*p->module);
  INFO(out);
  // One blank line where the source had one or more; none before a block's first statement.
  CHECK_THAT(out, Catch::Contains("  t0 = ltorch.mul(x, x)  # t0\n\n  # a note\n  t1 = t0\n\n  if t1:\n    a = 1\n\n    b = 2\n  return (t1,)\n"));
  CHECK_THAT(out, Catch::Contains("def g(a):\n  return a, a\n"));
  round_trips("blank lines", out);
}

namespace {

// Every location in a tree, in a fixed order: (file, offset, length) of each node, keyword,
// parameter, import and type comment.
struct Locs {
  std::vector<std::tuple<int32_t, uint32_t, uint32_t>> all;
  void at(const SourceLoc& l) { all.emplace_back(l.file, l.offset, l.length); }
  void expr(const ast::ExprPtr& e) {
    if (!e) {
      all.emplace_back(-2, 0, 0);
      return;
    }
    at(e->loc);
    for (const auto* v : {&e->items, &e->keys, &e->args})
      for (const auto& x : *v) expr(x);
    for (const auto& k : e->keywords) at(k.loc), expr(k.value);
    for (const auto& c : e->comps) {
      expr(c.target), expr(c.iter);
      for (const auto& x : c.conds) expr(x);
    }
    params(e->params);
  }
  void params(const std::vector<ast::Param>& ps) {
    for (const auto& p : ps) at(p.loc), expr(p.annotation), expr(p.default_value);
  }
  void block(const ast::Block& b) {
    for (const auto& s : b) {
      at(s->loc);
      for (const auto& x : s->targets) expr(x);
      expr(s->value), expr(s->annotation), expr(s->returns);
      for (const auto& x : s->decorators) expr(x);
      params(s->params);
      for (const auto& i : s->imports) at(i.loc);
      for (const auto& t : s->type_comments) at(t.loc);
      block(s->body), block(s->orelse);
    }
  }
};

}  // namespace

TEST_CASE("ast::clone copies every statement, comment and location, naming the new file", "[parser][unparse]") {
  std::vector<std::string> files;
  for (const char* dir : {"/stdlib", "/stdlib/passes", "/tests/thunder", "/tests/lang"})
    for (const std::string& f : files_in(source_dir() + dir, ".trace")) files.push_back(f);
  for (const std::string& f : files_in(source_dir() + "/tests/thunder", ".txt")) files.push_back(f);
  REQUIRE(files.size() > 20);
  for (const std::string& f : files) {
    DYNAMIC_SECTION(f) {
      auto a = parse_text(read_file(f), f);
      if (a->diags.has_errors()) continue;
      auto c = ast::clone(*a->module, 41);
      CHECK(c->file == 41);
      CHECK(c->header_comments == a->module->header_comments);
      CHECK(dump(c->body) == dump(a->module->body));
      CHECK(ast::unparse(*c) == ast::unparse(*a->module));
      Locs la, lc;
      la.block(a->module->body);
      lc.block(c->body);
      for (auto& [file, off, len] : la.all)
        if (file >= 0) file = 41;
      CHECK(lc.all == la.all);
    }
  }
}
