// The example passes written in the language (examples/passes): silu_rewrite gives the same
// results with one ltorch.silu per x * sigmoid(x), bytes_per_op prints a correct table, and the
// pass manager names the pass in its diagnostics when a pass fails (tests/passes holds the data).
#include <catch2/catch.hpp>

#include <sstream>

#include "tests/support.h"
#include "tracer/session.h"

namespace tracer::test {
namespace {

std::string example_pass(const std::string& name) { return source_dir() + "/examples/passes/" + name + ".trace"; }
std::string pass_data(const std::string& name) { return source_dir() + "/tests/passes/" + name; }

// The printed program without the commented lines (type comments, subsymbols, provenance).
std::string top_level(const std::string& printed) {
  std::string out;
  for (const std::string& l : lines(printed)) {
    size_t first = l.find_first_not_of(' ');
    if (first == std::string::npos || l[first] == '#') continue;
    out += l + "\n";
  }
  return out;
}

struct Program {
  std::unique_ptr<Session> s;
  std::string output;  // what scripts print()
};

// A session over `file` with the pass files and passes given, the verifier on.
Program open_program(const std::string& file, const std::vector<std::string>& pass_files, const std::vector<std::string>& passes) {
  Program p;
  SessionOptions so;
  std::string* out = &p.output;
  so.print = [out](const std::string& s) { *out += s; };
  p.s = std::make_unique<Session>(so);
  for (const auto& f : pass_files) {
    INFO(p.s->rendered_diagnostics());
    REQUIRE(p.s->add_pass_file(f));
  }
  INFO(p.s->rendered_diagnostics());
  REQUIRE(p.s->set_passes(passes));
  p.s->set_pass_options(true, {});
  REQUIRE(p.s->load_file(file));
  return p;
}

std::string print_entry(Program& p, const std::string& entry) {
  auto text = p.s->print(entry);
  INFO(p.s->rendered_diagnostics());
  REQUIRE(text);
  return *text;
}

RunReport run_entry(Program& p, const std::string& entry) {
  auto r = p.s->run(entry);
  INFO(p.s->rendered_diagnostics());
  REQUIRE(r);
  return *r;
}

// Same outputs (by position: names may differ), same values up to `eps` relative.
void same_outputs(const RunReport& a, const RunReport& b, double eps) {
  REQUIRE(a.outputs.size() == b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    const OutputInfo& x = a.outputs[i];
    const OutputInfo& y = b.outputs[i];
    INFO("output " << i << ": " << x.name << " = " << x.summary << " vs " << y.name << " = " << y.summary);
    CHECK(x.dtype == y.dtype);
    CHECK(x.shape == y.shape);
    CHECK(x.sum == Approx(y.sum).epsilon(eps).margin(eps));
    REQUIRE(x.head.size() == y.head.size());
    for (size_t k = 0; k < x.head.size(); ++k) CHECK(x.head[k] == Approx(y.head[k]).epsilon(eps).margin(eps));
  }
}

const std::string kSilu = "silu_rewrite";

}  // namespace

TEST_CASE("silu_rewrite turns the demo's x * sigmoid(x) into ltorch.silu(x)", "[passes][examples]") {
  std::string demo = example_pass("silu_demo");
  Program with = open_program(demo, {example_pass(kSilu)}, {kSilu});
  std::string entry = *with.s->entry("");
  CHECK(entry == "f");
  std::string printed = print_entry(with, entry);
  INFO(printed);
  std::string top = top_level(printed);
  CHECK(top.find("ltorch.silu(x)") != std::string::npos);
  CHECK(top.find("sigmoid") == std::string::npos);
  CHECK(top.find("prims.mul") == std::string::npos);
  CHECK(printed.find("ltorch.silu") != std::string::npos);
  CHECK(top.find("prims.reciprocal") == std::string::npos);
  CHECK(printed.find("# Constructed by silu_rewrite (took ") != std::string::npos);

  Program without = open_program(demo, {}, {});
  same_outputs(run_entry(with, entry), run_entry(without, entry), 1e-6);

  // The printed result is a program that reads back.
  Session back;
  INFO(back.rendered_diagnostics());
  CHECK(back.load_string("printed", printed));
}

TEST_CASE("silu_rewrite after grad: the forward is rewritten and the gradients do not change", "[passes][examples]") {
  std::string demo = example_pass("silu_demo");
  Program with = open_program(demo, {example_pass(kSilu)}, {"grad", kSilu, "del_last_used"});
  std::string printed = print_entry(with, "loss");
  INFO(printed);
  std::string forward = top_level(printed.substr(0, printed.find("def backward")));
  CHECK(forward.find("ltorch.silu(h)") != std::string::npos);
  CHECK(forward.find("prims.mul(h, ") == std::string::npos);
  Program without = open_program(demo, {}, {"grad", "del_last_used"});
  RunReport a = run_entry(with, "loss"), b = run_entry(without, "loss");
  REQUIRE(a.outputs.size() == 3);  // the loss, grad_x, grad_w
  same_outputs(a, b, 1e-5);
}

TEST_CASE("silu_rewrite: which patterns it rewrites, and the results stay the same", "[passes][examples]") {
  struct Case {
    std::string entry;
    int silus;         // ltorch.silu calls expected at the top level
    bool sigmoid_left; // a sigmoid (composite or reciprocal) still at the top level
    double eps;
  };
  const std::vector<Case> cases = {
      {"composite", 1, false, 1e-6},     {"swapped", 1, false, 1e-6}, {"shared", 1, true, 1e-6},
      {"other", 0, true, 1e-6},          {"primitives", 1, false, 1e-6},
      {"low_precision", 1, false, 1e-2},  // silu rounds once to bf16, x * sigmoid(x) twice
      {"nested", 2, false, 1e-6},        {"in_region", 1, false, 1e-6},
  };
  std::string file = pass_data("silu_cases.trace");
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.entry) {
      Program with = open_program(file, {example_pass(kSilu)}, {kSilu, "del_last_used"});
      std::string printed = print_entry(with, c.entry);
      INFO(printed);
      std::string top = top_level(printed);
      int silus = 0;
      for (size_t at = top.find("ltorch.silu("); at != std::string::npos; at = top.find("ltorch.silu(", at + 1)) ++silus;
      CHECK(silus == c.silus);
      bool sigmoid = top.find("ltorch.sigmoid(") != std::string::npos || top.find("prims.reciprocal(") != std::string::npos;
      CHECK(sigmoid == c.sigmoid_left);
      if (c.entry == "in_region") CHECK(top.find("with checkpoint():\n    t") != std::string::npos);
      Program without = open_program(file, {}, {});
      same_outputs(run_entry(with, c.entry), run_entry(without, c.entry), c.eps);
    }
  }
}

TEST_CASE("bytes_per_op prints the bytes each op writes, largest first, and changes nothing", "[passes][examples]") {
  std::string file = pass_data("bytes_tiny.trace");
  Program p = open_program(file, {example_pass("bytes_per_op")}, {"bytes_per_op"});
  std::string printed = print_entry(p, "tiny");
  INFO(p.output);

  // Rows of both tables: name, statements, bytes (the table of ops comes first).
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> titles;
  for (const std::string& l : lines(p.output)) {
    std::istringstream is(l);
    std::vector<std::string> w;
    for (std::string x; is >> x;) w.push_back(x);
    if (w.size() >= 2 && w[0] == "op" && (w[1] == "stmts" || w[1] == "kind")) {
      titles.push_back(l);
      rows.emplace_back();
      continue;
    }
    if (!rows.empty() && w.size() >= 3 && w[0] != "#") {
      rows.back().push_back(w[0] + " " + w[1] + " " + w[2]);
    }
  }
  REQUIRE(rows.size() == 2);
  // From the program's comments: mul 128 B, exp 2 x 128 B, convert_element_type 64 B, sum 16 B.
  CHECK(rows[0] == std::vector<std::string>{"exp 2 256", "mul 1 128", "convert_element_type 1 64", "sum 1 16"});
  CHECK(rows[1] == std::vector<std::string>{"elementwise 4 448", "reduction 1 16"});
  CHECK(p.output.find("# bytes written by 'tiny': 464 ") != std::string::npos);

  // The traces come back unchanged: only the provenance differs.
  Program plain = open_program(file, {}, {});
  std::string before = print_entry(plain, "tiny");
  CHECK(top_level(printed) == top_level(before));
  CHECK(printed.find("# Constructed by bytes_per_op (took ") != std::string::npos);
}

TEST_CASE("bytes_per_op after grad reports the forward and the backward", "[passes][examples]") {
  Program p = open_program(source_dir() + "/examples/mlp.trace", {example_pass("bytes_per_op")}, {"grad", "bytes_per_op"});
  print_entry(p, "mlp");
  CHECK(p.output.find("# bytes written by 'mlp': ") != std::string::npos);
  CHECK(p.output.find("# bytes written by 'backward': ") != std::string::npos);
}

TEST_CASE("a failing pass is reported with its name; the program without it is intact", "[passes][diagnostics]") {
  struct Case {
    std::string pass;
    std::vector<std::string> want;  // substrings of the first diagnostic
  };
  const std::vector<Case> cases = {
      {"raises", {"pass 'raises' failed", "boom in a pass"}},
      {"returns_int", {"pass 'returns_int'", "returned a int", "expected a list of traces"}},
      {"returns_strings", {"pass 'returns_strings'", "expected traces"}},
      {"returns_three", {"pass 'returns_three'", "one or two traces"}},
      {"mutates_then_raises", {"pass 'mutates_then_raises' failed", "failed after editing"}},
      {"drops_statements", {"pass 'drops_statements'", "broke trace 'f'"}},
  };
  std::string demo = example_pass("silu_demo");
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.pass) {
      Program p = open_program(demo, {pass_data("bad_passes.trace")}, {c.pass});
      std::string entry = *p.s->entry("f");
      CHECK_FALSE(p.s->print(entry));
      CHECK_FALSE(p.s->run(entry));
      REQUIRE_FALSE(p.s->diagnostics().empty());
      const DiagnosticInfo& d = p.s->diagnostics().front();
      INFO(p.s->rendered_diagnostics());
      CHECK(d.severity == "error");
      for (const std::string& w : c.want) CHECK(d.message.find(w) != std::string::npos);

      // Without the pass, the same session still prints and runs the original program.
      p.s->clear_diagnostics();
      REQUIRE(p.s->set_passes({}));
      std::string printed = print_entry(p, entry);
      CHECK(printed.find("prims.mul(x, t3)") != std::string::npos);
      Program plain = open_program(demo, {}, {});
      CHECK(printed == print_entry(plain, entry));
      same_outputs(run_entry(p, entry), run_entry(plain, entry), 0);
    }
  }
}

TEST_CASE("a trace a pass broke goes through without the verifier and is caught with it", "[passes][diagnostics]") {
  // Without the verifier (as `tracer` without --verify), print shows the trace as the pass left
  // it; with it (a Session's default), the pass is named.
  Session s;
  REQUIRE(s.add_pass_file(pass_data("bad_passes.trace")));
  REQUIRE(s.set_passes({"drops_statements"}));
  REQUIRE(s.load_file(example_pass("silu_demo")));
  CHECK_FALSE(s.print("f"));
  CHECK(s.rendered_diagnostics().find("pass 'drops_statements'") != std::string::npos);
  s.clear_diagnostics();
  s.set_pass_options(false, {});
  auto printed = s.print("f");
  INFO(s.rendered_diagnostics());
  REQUIRE(printed);
  CHECK(top_level(*printed).find("prims.mul") == std::string::npos);
}

}  // namespace tracer::test
