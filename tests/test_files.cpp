// File-driven tests: language tests with inline "# expect:" lines (tests/lang), diagnostics
// tests with "# expect-error" lines (tests/diagnostics), pass checks, print/parse round trips
// over every example and tests/thunder case, and the memory estimate against the measured peak.
// Thunder's printouts run, checked and measured: test_thunder_printouts.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <regex>

#include "runtime/io.h"
#include "tests/printout_support.h"
#include "tests/support.h"
#include "tracer/session.h"

namespace tracer::test {
namespace {

struct Expectations {
  std::vector<std::string> output;
  int error_line = 0;
  std::string error_text;
};

// "# expect: TEXT" expects TEXT as the next line of output; "# expect-error: TEXT" expects the
// run to stop with an error on that line whose message contains TEXT.
Expectations read_expectations(const std::string& text) {
  Expectations e;
  std::vector<std::string> ls = lines(text);
  for (size_t i = 0; i < ls.size(); ++i) {
    const std::string& l = ls[i];
    size_t p = l.find("# expect: ");
    if (p != std::string::npos) e.output.push_back(l.substr(p + 10));
    p = l.find("# expect-error: ");
    if (p != std::string::npos) {
      e.error_line = static_cast<int>(i + 1);
      e.error_text = l.substr(p + 16);
    }
  }
  return e;
}

}  // namespace

TEST_CASE("language tests (tests/lang)", "[lang]") {
  auto files = files_in(source_dir() + "/tests/lang", ".trace");
  REQUIRE(files.size() >= 5);
  for (const std::string& f : files) {
    DYNAMIC_SECTION(f) {
      std::string text = read_file(f);
      Expectations want = read_expectations(text);
      ScriptRun r;
      interp::Options opts;
      opts.step_limit = 5'000'000;
      // Below tests/ (a language test may load a printout of tests/thunder with load_module).
      run_script(r, f, text, opts, source_dir() + "/tests");
      INFO(r.rendered);
      CHECK(lines(r.output) == want.output);
      if (want.error_line == 0) {
        CHECK(r.ok);
      } else {
        REQUIRE_FALSE(r.ok);
        const Diagnostic& d = r.diags.items().front();
        CHECK(r.sm.line_col(d.loc).line == want.error_line);
        CHECK_THAT(d.message, Catch::Contains(want.error_text));
      }
    }
  }
}

namespace {

struct ExpectedDiag {
  int line;
  std::string text;
  bool matched = false;
};

// "# expect-error: TEXT" on a line expects an error there; "# expect-error@+N: TEXT" N lines below.
std::vector<ExpectedDiag> expected_diags(const std::string& text) {
  std::vector<ExpectedDiag> out;
  std::regex re("# expect-error(@\\+([0-9]+))?: (.*)$");
  std::vector<std::string> ls = lines(text);
  for (size_t i = 0; i < ls.size(); ++i) {
    std::smatch m;
    if (std::regex_search(ls[i], m, re))
      out.push_back({static_cast<int>(i + 1) + (m[2].matched ? std::stoi(m[2]) : 0), m[3], false});
  }
  return out;
}

}  // namespace

TEST_CASE("diagnostics tests (tests/diagnostics)", "[diagnostics]") {
  auto files = files_in(source_dir() + "/tests/diagnostics", ".trace");
  REQUIRE(files.size() >= 5);
  for (const std::string& f : files) {
    DYNAMIC_SECTION(f) {
      std::vector<ExpectedDiag> want = expected_diags(read_file(f));
      REQUIRE_FALSE(want.empty());
      Session s;
      CHECK_FALSE(s.check_file(f, false));
      INFO(s.rendered_diagnostics());
      for (const DiagnosticInfo& d : s.diagnostics()) {
        bool found = false;
        for (auto& w : want)
          if (!w.matched && w.line == d.line && d.message.find(w.text) != std::string::npos) found = w.matched = true;
        INFO("unexpected diagnostic at line " << d.line << ": " << d.message);
        CHECK(found);
        CHECK_THAT(d.rendered, Catch::Contains(f + ":" + std::to_string(d.line) + ":") && Catch::Contains("^"));
      }
      for (const auto& w : want) {
        INFO("expected an error at line " << w.line << " containing: " << w.text);
        CHECK(w.matched);
      }
    }
  }
}

TEST_CASE("pass tests (tests/pass_checks): # RUN: passes, # CHECK: lines in order", "[passes]") {
  auto files = files_in(source_dir() + "/tests/pass_checks", ".trace");
  REQUIRE(files.size() >= 5);
  for (const std::string& f : files) {
    DYNAMIC_SECTION(f) {
      std::string text = read_file(f);
      std::vector<std::string> passes, checks, nots, top_nots;
      for (const std::string& l : lines(text)) {
        if (l.rfind("# RUN: --passes ", 0) == 0) {
          std::string list = l.substr(16);
          size_t start = 0;
          while (start <= list.size()) {
            size_t c = list.find(',', start);
            passes.push_back(list.substr(start, c == std::string::npos ? std::string::npos : c - start));
            if (c == std::string::npos) break;
            start = c + 1;
          }
        }
        if (l.rfind("# CHECK: ", 0) == 0) checks.push_back(l.substr(9));
        if (l.rfind("# CHECK-NOT: ", 0) == 0) nots.push_back(l.substr(13));
        if (l.rfind("# CHECK-NOT-TOP: ", 0) == 0) top_nots.push_back(l.substr(17));  // in statements, not comments
      }
      REQUIRE_FALSE(passes.empty());
      Session s;
      REQUIRE(s.set_passes(passes));
      REQUIRE(s.load_string(f, text));
      auto printed = s.print(*s.entry(""));
      INFO(s.rendered_diagnostics());
      REQUIRE(printed);
      INFO("printed:\n" << *printed);
      size_t pos = 0;
      for (const std::string& c : checks) {
        size_t at = printed->find(c, pos);
        INFO("CHECK: " << c);
        CHECK(at != std::string::npos);
        if (at != std::string::npos) pos = at + c.size();
      }
      for (const std::string& n : nots) {
        INFO("CHECK-NOT: " << n);
        CHECK(printed->find(n) == std::string::npos);
      }
      std::string statements;  // the printed lines that are not comments (fusions' bodies are)
      for (const std::string& l : lines(*printed)) {
        size_t first = l.find_first_not_of(' ');
        if (first != std::string::npos && l[first] != '#') statements += l + "\n";
      }
      for (const std::string& n : top_nots) {
        INFO("CHECK-NOT-TOP: " << n);
        CHECK(statements.find(n) == std::string::npos);
      }
      // The printed program reads back to the same text.
      Session b;
      REQUIRE(b.load_string(f + " (printed)", *printed));
    }
  }
}

namespace {

const std::vector<std::pair<std::string, std::string>> kSmall = {{"T", "16"}, {"L", "2"}, {"D", "32"},
                                                                  {"H", "48"}, {"R", "8"},  {"C", "16"}, {"NH", "4"}, {"V", "64"}};

}  // namespace

TEST_CASE("round trip: print(parse(print(T))) == print(T) for every example", "[roundtrip]") {
  auto files = example_programs(source_dir() + "/examples");
  REQUIRE(files.size() >= 4);
  for (const std::string& f : files) {
    DYNAMIC_SECTION(f) { round_trip(f, read_file(f), "", kSmall); }
  }
}

TEST_CASE("round trip of the Thunder-style cases in tests/thunder", "[roundtrip]") {
  auto files = files_in(source_dir() + "/tests/thunder", ".txt");
  REQUIRE(files.size() >= 2);
  // An execution trace's DTensor inputs carry no local types: the command line's (--type) give them.
  const std::map<std::string, std::map<std::string, std::string>> types = {
      // (A world of one: each DTensor input is its whole, replicated.)
      {"dtensor_prims.txt", {{"l_x_", "f32[6, 4]"}, {"l_w_", "f32[6, 4]"}}},
      {"dtensor_tp_prims.txt", {{"l_x_", "f32[4, 6]"}, {"l_w1_", "f32[8, 6]"}, {"l_b1_", "f32[8]"}, {"l_w2_", "f32[5, 8]"}, {"l_s_", "f32[5]"}}},
      {"dtensor_grouped_mm.txt", {{"l_a_", "f32[6, 8]"}, {"l_b_", "f32[3, 8, 5]"}, {"l_offs_", "i32[3]"}}}};
  for (const std::string& f : files) {
    auto t = types.find(std::filesystem::path(f).filename().string());
    DYNAMIC_SECTION(f) { round_trip(f, read_file(f), "", {}, t == types.end() ? std::map<std::string, std::string>{} : t->second); }
  }
}

TEST_CASE("the memory estimate equals the CPU allocator's measured peak on every example", "[memory]") {
  const std::vector<std::vector<std::string>> pipelines = {
      {}, {"del_last_used"}, {"grad"}, {"grad", "del_last_used"}, {"grad", "cse", "dce", "del_last_used"},
      {"fuse", "del_last_used"}, {"grad", "checkpoint", "philox", "remat", "fuse", "del_last_used"},
      {"grad", "philox", "remat", "fuse_reorder", "del_last_used"}};
  auto files = example_programs(source_dir() + "/examples");
  for (const std::string& f : files) {
    for (const auto& passes : pipelines) {
      std::string label = f + " --passes ";
      for (const auto& p : passes) label += p + ",";
      DYNAMIC_SECTION(label) {
        Session s;
        for (const auto& [k, v] : kSmall) s.set(k, v);
        REQUIRE(s.set_passes(passes));
        REQUIRE(s.load_file(f));
        auto r = s.run(*s.entry(""));
        INFO(s.rendered_diagnostics());
        REQUIRE(r);
        auto m = s.memory(*s.entry(""));
        REQUIRE(m);
        CHECK(m->peak_bytes == r->estimated_peak_bytes);
        INFO("measured " << r->peak_bytes << ", estimated " << r->estimated_peak_bytes);
        CHECK(std::fabs(double(r->peak_bytes) - double(r->estimated_peak_bytes)) <= 0.01 * double(r->estimated_peak_bytes));
      }
    }
  }
}

}  // namespace tracer::test

TEST_CASE("the session completes names for the REPL's Tab", "[repl]") {
  tracer::Session s;
  std::string shown;
  REQUIRE(s.eval("<t>", "my_unique_value = 7\ndef my_function(x):\n    return x\n", &shown));
  auto c = s.completions("my_");
  CHECK(c == std::vector<std::string>{"my_function", "my_unique_value"});
  auto p = s.completions("prims.ad");
  CHECK(std::find(p.begin(), p.end(), "prims.add") != p.end());
  for (const auto& x : p) CHECK(x.rfind("prims.ad", 0) == 0);
  auto l = s.completions("ltorch.rms");
  CHECK(std::find(l.begin(), l.end(), "ltorch.rms_norm") != l.end());
  auto b = s.completions("pri");
  CHECK(std::find(b.begin(), b.end(), "print") != b.end());
  CHECK(std::find(b.begin(), b.end(), "prims") != b.end());
  CHECK(s.completions("no_such_prefix_at_all").empty());
}
