// Parser front end on real Lightning Thunder printouts: they parse as they are, type comments
// and fusion bodies land where the AST contract says, and locations point at the right bytes.
#include <catch2/catch.hpp>

#include "tests/support.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "parse_helpers.h"

using namespace tracer;
using namespace tracer::parse::testing;
using ast::ExprKind;
using ast::StmtKind;

namespace {

namespace fs = std::filesystem;

fs::path traces_dir() { return fs::path(test::thunder_dir()); }

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_separator(const std::string& line) {
  return line.size() >= 3 && std::all_of(line.begin(), line.end(), [](char c) { return c == '*'; });
}

// A file may hold several traces separated by a line of asterisks.
std::vector<std::string> split_traces(const std::string& text) {
  std::vector<std::string> parts(1);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (is_separator(line)) parts.emplace_back();
    else parts.back() += line + "\n";
  }
  return parts;
}

std::vector<std::string> trace(const std::string& file_name) {
  fs::path p = traces_dir() / file_name;
  INFO("trace file " << p.string() << " (set TRACER_THUNDER_TRACES)");
  REQUIRE(fs::exists(p));
  return split_traces(read_file(p));
}

const ast::Stmt& only_function(const Parsed& p) {
  for (const auto& s : p.module->body)
    if (s->kind == StmtKind::FunctionDef) return *s;
  FAIL("no function in trace");
  throw 0;
}

std::vector<std::string> target_names(const ast::Block& body) {
  std::vector<std::string> names;
  for (const auto& s : body) names.push_back(s->is_assign() ? sexpr(s->targets[0].get()) : "?");
  return names;
}

std::vector<const ast::Stmt*> fusions(const ast::Stmt& fn) {
  std::vector<const ast::Stmt*> out;
  for (const auto& s : fn.body)
    if (s->kind == StmtKind::FusionDef && !s->decomposed) out.push_back(s.get());  // not calls printed with their decompositions
  return out;
}

}  // namespace

TEST_CASE("every Thunder trace parses without errors", "[parser][thunder]") {
  INFO("traces folder " << traces_dir().string() << " (set TRACER_THUNDER_TRACES)");
  REQUIRE(fs::is_directory(traces_dir()));
  int parsed = 0;
  for (const auto& entry : fs::directory_iterator(traces_dir())) {
    for (const std::string& part : split_traces(read_file(entry.path()))) {
      auto p = parse_text(part, entry.path().filename().string());
      INFO(entry.path().filename().string() << "\n" << p->rendered());
      CHECK_FALSE(p->diags.has_errors());
      CHECK(p->module->body.size() >= 3);
      ++parsed;
    }
  }
  CHECK(parsed >= 5);
}

TEST_CASE("trace 01: header, decorators, type comments, subsymbol comments", "[parser][thunder]") {
  auto p = parse_text(trace("01_simple_add_cpu_execution_trace.txt").at(0));
  REQUIRE_FALSE(p->diags.has_errors());
  CHECK(p->module->header_comments == std::vector<std::string>{"Constructed by Unwrap the actual return value"});
  const ast::Stmt& fn = only_function(*p);
  CHECK(fn.name == "computation");
  REQUIRE(fn.decorators.size() == 2);
  CHECK(sexpr(fn.decorators[0].get()) == "(Call (Attr torch no_grad))");
  CHECK(sexpr(fn.decorators[1].get()) == "no_autocast");
  CHECK(dump(fn.body) ==
        "type x \"cpu f32[3, 3]\"\n"
        "type y \"cpu f32[3, 3, 3]\"\n"
        "decomposed t1 = (Call (Attr torch add) x y alpha=1)  # t1: \"cpu f32[3, 3, 3]\"\n"
        "  decomposed t1 = (Call (Attr ltorch add) x y alpha=1)  # t1: \"cpu f32[3, 3, 3]\"\n"
        "    assign t4 = (Call (Attr prims broadcast_in_dim) x (Tuple 3 3 3) (Tuple 1 2))  # t4: \"cpu f32[3, 3, 3]\"\n"
        "    assign t1 = (Call (Attr prims add) t4 y)  # t1: \"cpu f32[3, 3, 3]\"\n"
        "return t1\n");
  // Nested subsymbols are the decompositions of the statements above them, level by level, and
  // their locations point into the file.
  const ast::Stmt& nested = *fn.body[2]->body[0]->body[0];
  CHECK(p->text_at(nested.loc) == "t4 = prims.broadcast_in_dim(x, (3, 3, 3), (1, 2))");
  CHECK(p->text_at(nested.type_comments[0].loc) == "# t4: \"cpu f32[3, 3, 3]\"");
  CHECK(p->text_at(fn.body[0]->loc) == "# x: \"cpu f32[3, 3]\"");
  CHECK(p->text_at(fn.body[2]->type_comments[0].loc) == "# t1: \"cpu f32[3, 3, 3]\"");
}

TEST_CASE("trace 02: the nvFusion0 body holds its subsymbols in order", "[parser][thunder][fusion]") {
  auto p = parse_text(trace("02_llama_mlp_nvfusion_dels.txt").at(0));
  REQUIRE_FALSE(p->diags.has_errors());
  const ast::Stmt& fn = only_function(*p);
  auto fs = fusions(fn);
  REQUIRE(fs.size() == 1);
  const ast::Stmt& fusion = *fs[0];
  CHECK(sexpr(fusion.targets[0].get()) == "(List result)");
  CHECK(sexpr(fusion.value.get()) == "(Call nvFusion0 x_fc_1 x_fc_2)");
  CHECK(target_names(fusion.body) == std::vector<std::string>{"t9", "t10", "t11", "t12", "a", "result"});
  CHECK(sexpr(fusion.body[2]->value.get()) == "(Call (Attr prims add) 1.0 t10)");
  for (const auto& s : fusion.body) {
    REQUIRE(s->type_comments.size() == 1);
    CHECK(s->type_comments[0].type_string == "cuda:0 f32[2, 2048, 11008]");
  }
  // Sub-statement locations point into the original file.
  CHECK(p->text_at(fusion.body[0]->loc) == "t9 = prims.neg(x_fc_1)");
  CHECK(p->text_at(fusion.body[5]->value->loc) == "prims.mul(a, x_fc_2)");
  CHECK(p->text_at(fusion.body[0]->type_comments[0].loc) == "# t9: \"cuda:0 f32[2, 2048, 11008]\"");
  CHECK(p->sm.line_col(fusion.body[1]->loc).line == 23);
  CHECK(p->sm.line_col(fusion.body[1]->loc).col == 7);
  // The statement after the fusion is the del, and the comments are not left over.
  auto it = std::find_if(fn.body.begin(), fn.body.end(), [&](const auto& s) { return s.get() == &fusion; });
  CHECK((*(it + 1))->kind == StmtKind::Del);
  CHECK((*(it + 1))->comments.empty());
}

TEST_CASE("trace 05: FSDP forward and backward", "[parser][thunder][fusion]") {
  auto parts = trace("05_fsdp_zero2_forward_and_backward.txt");
  REQUIRE(parts.size() == 2);
  auto fw = parse_text(parts[0]);
  auto bw = parse_text(parts[1]);
  REQUIRE_FALSE(fw->diags.has_errors());
  REQUIRE_FALSE(bw->diags.has_errors());

  SECTION("type comments interleave with statements in the forward body") {
    const ast::Stmt& fn = only_function(*fw);
    std::vector<StmtKind> kinds;
    for (size_t i = 0; i < 9; ++i) kinds.push_back(fn.body[i]->kind);
    using K = StmtKind;
    CHECK(kinds == std::vector<K>{K::TypeComment, K::TypeComment, K::Assign, K::TypeComment, K::Assign,
                                  K::TypeComment, K::Assign, K::TypeComment, K::Assign});
    CHECK(fn.body[3]->name == "t_2_bias");
    CHECK(fn.body[3]->type_string == "cuda:0 f32[32]");
    CHECK(fn.body[4]->type_comments[0].type_string == "FUTURE cuda:0 f32[64]");
    auto fs = fusions(fn);
    REQUIRE(fs.size() == 1);
    CHECK(target_names(fs[0]->body) == std::vector<std::string>{"t7", "t8"});
    CHECK(sexpr(fn.body.back()->value.get()) ==
          "(Tuple (Dict \"output\":t11 \"flat_args\":(List input t_0_bias t_2_bias t_0_weight t_2_weight) "
          "\"flat_output\":(Tuple t11)) (Tuple (Tuple input t10 t7 t8) (Tuple)))");
  }

  SECTION("backward: backslash-continued unpacking and three fusions") {
    const ast::Stmt& fn = only_function(*bw);
    CHECK(sexpr(fn.decorators[1].get()) == "(Call no_autocast)");
    CHECK(head(*fn.body[2]) == "assign (Tuple C0 _) = saved_for_backward");
    CHECK(head(*fn.body[5]) == "assign (Tuple t0) = cotangents");
    CHECK(head(*fn.body[8]) == "assign (Tuple input t10 t7 t8) = C0");
    auto fs = fusions(fn);
    REQUIRE(fs.size() == 3);
    CHECK(target_names(fs[0]->body) == std::vector<std::string>{"t35", "t51"});
    CHECK(target_names(fs[1]->body) == std::vector<std::string>{"t39", "t47", "t54", "t36"});
    CHECK(target_names(fs[2]->body) == std::vector<std::string>{"t48"});
    CHECK(sexpr(fs[1]->targets[0].get()) == "(List t36 t39 t54)");
    CHECK(sexpr(fs[0]->body[0]->value.get()) == "(Call (Attr prims sum) t0 (Tuple 0))");
  }
}

TEST_CASE("trace 09: type comments between statements stay in the body", "[parser][thunder]") {
  auto p = parse_text(trace("09_grad_transform_multimul.txt").at(0));
  REQUIRE_FALSE(p->diags.has_errors());
  const ast::Stmt& fn = only_function(*p);
  std::vector<std::string> type_names;
  for (const auto& s : fn.body)
    if (s->kind == StmtKind::TypeComment) type_names.push_back(s->name);
  CHECK(type_names == std::vector<std::string>{"t_1", "t_0", "t_3", "t_2"});
  CHECK(fn.body[4]->kind == StmtKind::TypeComment);  // "# t_0" after "del t_1"
  CHECK(fn.body[3]->kind == StmtKind::Del);
  CHECK(sexpr(fn.body.back()->value.get()) == "(List t2 t3 t6 t7)");
}

TEST_CASE("comment placement rules", "[parser][comments]") {
  auto p = parse_text(
      "# header one\n"
      "#   header two  \n"
      "import torch\n"
      "# about f\n"
      "def f(x):  # x: \"cpu f32[2]\"\n"
      "  # x: \"cpu f32[2]\"   \n"
      "  y = g(x)  # y: \"cpu f32[2]\"\n"
      "  # y: \"cpu f32[2]\" trailing words\n"
      "  z = 1; w = 2  # w: \"int\"\n"
      "  # z: \"int\"\n"
      "x = 1\n");
  REQUIRE_FALSE(p->diags.has_errors());
  CHECK(p->module->header_comments == std::vector<std::string>{"header one", "header two"});
  const auto& body = p->module->body;
  REQUIRE(body.size() == 3);
  CHECK(body[1]->comments == std::vector<std::string>{"about f"});
  CHECK(body[1]->type_comments.size() == 1);  // a trailing one on the def line
  CHECK(dump(body[1]->body) ==
        "type x \"cpu f32[2]\"\n"
        "assign y = (Call g x)  # y: \"cpu f32[2]\"\n"
        "assign z = 1\n"
        "assign w = 2  # w: \"int\"\n"
        "type z \"int\"\n");
  CHECK(body[1]->body[2]->comments == std::vector<std::string>{"y: \"cpu f32[2]\" trailing words"});
}

TEST_CASE("fusion rules: fusion calls with deeper comment lines; other calls with subsymbol lines are decomposed calls, level by level", "[parser][fusion]") {
  auto p = parse_text(
      "def f(a, b):\n"
      "  [c] = fusion3(a)\n"
      "    # c = prims.neg(a)  # c: \"f32[2]\"\n"
      "      # nested = detail(a)\n"
      "    # d = prims.exp(c)\n"
      "  # e: \"f32[2]\"\n"
      "  [e] = helper(b)\n"
      "    # e = prims.neg(b)\n"
      "  m = other(b)\n"
      "    # a note deeper than its statement\n"
      "  (g, h) = TorchCompile12(a, b)\n"
      "  [k] = nvFusion1(a)\n"
      "  return c\n");
  REQUIRE_FALSE(p->diags.has_errors());
  const auto& body = p->module->body[0]->body;
  CHECK(dump(body) ==
        "fusion (List c) = (Call fusion3 a)\n"
        "  decomposed c = (Call (Attr prims neg) a)  # c: \"f32[2]\"\n"
        "    assign nested = (Call detail a)\n"
        "  assign d = (Call (Attr prims exp) c)\n"
        "type e \"f32[2]\"\n"
        "decomposed (List e) = (Call helper b)\n"
        "  assign e = (Call (Attr prims neg) b)\n"
        "assign m = (Call other b)\n"
        "assign (Tuple g h) = (Call TorchCompile12 a b)\n"
        "assign (List k) = (Call nvFusion1 a)\n"
        "return c\n");
  CHECK(p->text_at(body[0]->body[1]->loc) == "d = prims.exp(c)");
  CHECK(p->text_at(body[0]->body[0]->body[0]->loc) == "nested = detail(a)");
}

TEST_CASE("errors inside fusion bodies point into the file", "[parser][fusion][errors]") {
  auto p = parse_text(
      "def f(a):\n"
      "  [b] = nvFusion0(a)\n"
      "    # b = prims.neg(a)\n"
      "    # c = = 1\n"
      "  return b\n");
  CHECK(p->errors() == std::vector<std::string>{"4:11: expected an expression"});
  CHECK(dump(p->module->body[0]->body) == "fusion (List b) = (Call nvFusion0 a)\n  assign b = (Call (Attr prims neg) a)\nreturn b\n");
}

TEST_CASE("a file of comments only has them as header", "[parser][comments]") {
  auto p = parse_text("# one\n\n# two: \"not a statement\" here\n");
  CHECK(p->module->body.empty());
  CHECK(p->module->header_comments == std::vector<std::string>{"one", "two: \"not a statement\" here"});
}
