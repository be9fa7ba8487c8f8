// The docs' samples run (README.md and docs/*.md): a ```sh block holding one `tracer` command,
// followed (blank lines between at most) by a fenced block of another kind, is a command and its
// sample output. The test runs the command from the source tree with the built tracer and
// compares its standard output line by line: a line that is `...` (indentation aside) stands for
// any number of lines, trailing spaces do not count, and pass timings ("took N milliseconds")
// are compared without their numbers. A sample that drifted from what the program prints fails
// here (tests/README.md, "Docs").
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "tests/support.h"

#ifndef TRACER_CLI_PATH
#define TRACER_CLI_PATH "tracer"
#endif

namespace tracer::test {

namespace {

struct Sample {
  std::string file;
  int line = 0;
  std::string command;
  std::vector<std::string> expected;
};

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

std::vector<Sample> samples_in(const std::string& path, const std::string& label) {
  struct Block {
    int line;
    std::string lang;
    std::vector<std::string> body;
    size_t end;  // index of the closing fence
  };
  std::vector<std::string> ls = split_lines(read_file(path));
  std::vector<Block> blocks;
  std::regex open("^\\s*```(\\w*)\\s*$"), close("^\\s*```\\s*$");
  for (size_t i = 0; i < ls.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(ls[i], m, open)) continue;
    Block b{static_cast<int>(i + 1), m[1], {}, i};
    size_t j = i + 1;
    while (j < ls.size() && !std::regex_match(ls[j], close)) b.body.push_back(ls[j++]);
    b.end = j;
    blocks.push_back(std::move(b));
    i = j;
  }
  std::vector<Sample> out;
  for (size_t k = 0; k + 1 < blocks.size(); ++k) {
    const Block &a = blocks[k], &b = blocks[k + 1];
    if (a.lang != "sh" || b.lang == "sh") continue;
    bool adjacent = true;
    for (size_t i = a.end + 1; i + 1 < static_cast<size_t>(b.line); ++i) adjacent = adjacent && ls[i].find_first_not_of(" \t") == std::string::npos;
    if (!adjacent) continue;
    // One command, its continuation lines joined.
    std::string cmd;
    for (const std::string& l : a.body) {
      std::string t = l;
      if (!t.empty() && t.back() == '\\') t.pop_back();
      cmd += t + " ";
    }
    if (cmd.rfind("tracer ", 0) != 0) continue;
    out.push_back({label, a.line, cmd.substr(7), b.body});
  }
  return out;
}

std::string normalize(std::string l) {
  while (!l.empty() && (l.back() == ' ' || l.back() == '\r')) l.pop_back();
  return std::regex_replace(l, std::regex("took [0-9]+ milliseconds"), "took N milliseconds");
}

bool is_gap(const std::string& l) {
  size_t b = l.find_first_not_of(" \t");
  return b != std::string::npos && l.substr(b) == "...";
}

// Whether got matches want from positions i and j on (`...` takes any run of lines).
bool matches(const std::vector<std::string>& want, size_t i, const std::vector<std::string>& got, size_t j) {
  if (i == want.size()) return j == got.size();
  if (is_gap(want[i])) {
    for (size_t k = j; k <= got.size(); ++k)
      if (matches(want, i + 1, got, k)) return true;
    return false;
  }
  return j < got.size() && normalize(want[i]) == normalize(got[j]) && matches(want, i + 1, got, j + 1);
}

std::string run(const std::string& command, int* rc) { return run_tracer(TRACER_CLI_PATH, command, false, rc); }

}  // namespace

TEST_CASE("the docs' commands print what their samples show (README.md, docs/*.md)", "[docs]") {
  std::vector<Sample> all;
  auto add = [&](const std::string& rel) {
    auto s = samples_in(source_dir() + "/" + rel, rel);
    all.insert(all.end(), s.begin(), s.end());
  };
  add("README.md");
  for (const auto& e : std::filesystem::directory_iterator(source_dir() + "/docs"))
    if (e.path().extension() == ".md") add("docs/" + e.path().filename().string());
  REQUIRE(all.size() >= 2);  // docs/passes.md's silu_rewrite and bytes_per_op
  for (const Sample& s : all) {
    DYNAMIC_SECTION(s.file << ":" << s.line) {
      int rc = 0;
      std::string got = run(s.command, &rc);
      INFO("tracer " << s.command);
      INFO("printed:\n" << got);
      CHECK(rc == 0);
      CHECK(matches(s.expected, 0, split_lines(got), 0));
    }
  }
}

}  // namespace tracer::test
