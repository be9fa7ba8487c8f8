// Bad input of any kind gives diagnostics, never a crash: mutated sources through parse, load,
// trace and run (meant to run under AddressSanitizer and UBSan too), and malformed tensor files.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "runtime/io.h"
#include "tests/support.h"
#include "tracer/session.h"

namespace tracer::test {
namespace {

struct Seed {
  std::string text;
  bool run;  // small enough to execute; the others are only traced
};

std::vector<Seed> corpus() {
  std::vector<Seed> out;
  for (const auto& f : files_in(source_dir() + "/examples", ".trace")) out.push_back({read_file(f), true});
  for (const auto& f : files_in(source_dir() + "/tests/lang", ".trace")) out.push_back({read_file(f), true});
  // Thunder's printouts have full-size shapes (a 4096 x 11008 matmul): trace them, don't run them.
  for (const auto& f : files_in(thunder_dir(), ".txt")) out.push_back({read_file(f), false});
  return out;
}

// One random edit: delete, duplicate, or replace a span, or insert bytes that stress the lexer.
std::string mutate(const std::string& s, std::mt19937& rng) {
  if (s.empty()) return s;
  static const char* inserts[] = {"(", ")", "[", "]", ":", "\n", "\t", "    ", "\\\n", "'", "\"\"\"", "#", "@",
                                  "**", "lambda", "def ", "\xff\xfe", "\0", "1e999", "[" "[" "[", "*", ","};
  std::uniform_int_distribution<size_t> pos(0, s.size() - 1);
  size_t a = pos(rng), len = std::min<size_t>(s.size() - a, rng() % 24);
  switch (rng() % 4) {
    case 0: return s.substr(0, a) + s.substr(a + len);
    case 1: return s.substr(0, a) + s.substr(a, len) + s.substr(a);
    case 2: {
      std::string junk(len, ' ');
      for (char& c : junk) c = static_cast<char>(rng() % 256);
      return s.substr(0, a) + junk + s.substr(a + len);
    }
    default: return s.substr(0, a) + inserts[rng() % (sizeof(inserts) / sizeof(*inserts))] + s.substr(a);
  }
}

}  // namespace

TEST_CASE("mutated sources never crash the parser, the interpreter or the tracer", "[robustness]") {
  std::vector<Seed> texts = corpus();
  REQUIRE(texts.size() >= 8);
  std::mt19937 rng(1234);
  // TRACER_MUTANTS: how many (600 by default; scripts/test.sh runs fewer under the sanitizers,
  // where each mutant's run is ten times slower).
  const char* env = std::getenv("TRACER_MUTANTS");
  int failed = 0, total = env && std::atoi(env) > 0 ? std::atoi(env) : 600;
  for (int i = 0; i < total; ++i) {
    const Seed& seed = texts[static_cast<size_t>(i) % texts.size()];
    std::string text = seed.text;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < edits; ++k) text = mutate(text, rng);
    SessionOptions so;
    so.step_limit = 200000;
    // Values up to 1 GiB: a mutant such as "ab" * 10000000000 is then a located error, not a
    // 20 GB allocation (which the sanitizers' allocator aborts on, and which takes a small
    // machine's memory).
    so.memory_limit = size_t(1) << 30;
    so.print = [](const std::string&) {};
    Session s(so);
    for (const char* k : {"T", "L", "D", "H", "R", "C", "B"}) s.set(k, "4");
    bool ok = s.load_string("mutant.trace", text);
    if (ok) {
      auto e = s.entry("");
      if (e) ok = seed.run ? s.run(*e).has_value() : s.print(*e).has_value();
    }
    if (!ok) {
      ++failed;
      // A failure always comes with at least one rendered error diagnostic.
      REQUIRE_FALSE(s.diagnostics().empty());
      CHECK_THAT(s.rendered_diagnostics(), Catch::Contains("error: "));
    }
  }
  // Most mutants are broken; the point is that none crashed and each failure said why.
  CHECK(failed > total / 4);
}

TEST_CASE("malformed tensor files are rejected with a message naming the file", "[robustness]") {
  std::string dir = std::filesystem::temp_directory_path().string();
  std::string npy = dir + "/tracer_bad.npy", st = dir + "/tracer_bad.safetensors";
  rt::Tensor t = rt::Tensor::zeros(rt::DType::f32, {4, 4});
  rt::write_npy(npy, t);
  std::string good = read_file(npy);
  std::mt19937 rng(99);
  for (int i = 0; i < 200; ++i) {
    std::string bad = good.substr(0, rng() % good.size());
    if (i % 2) bad = mutate(good, rng);
    std::ofstream(npy, std::ios::binary) << bad;
    try {
      rt::Tensor r = rt::read_npy(npy);
      CHECK(r.numel() * 4 <= static_cast<int64_t>(bad.size()));  // whatever was read was really there
    } catch (const std::runtime_error& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains("tracer_bad.npy"));
    }
  }
  rt::write_safetensors(st, {{"w", t}});
  good = read_file(st);
  for (int i = 0; i < 200; ++i) {
    std::string bad = i % 2 ? good.substr(0, rng() % good.size()) : mutate(good, rng);
    std::ofstream(st, std::ios::binary) << bad;
    try {
      auto m = rt::read_safetensors(st);
      for (auto& kv : m) CHECK(kv.second.nbytes() <= bad.size());
    } catch (const std::runtime_error& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains("tracer_bad.safetensors"));
    }
  }
}

TEST_CASE("long loops inside builtins stop at an interrupt", "[robustness][interrupt]") {
  // Each takes seconds without the polls in the builtins' own loops (a range iterated, a sum, a
  // sort, a repeat, a join); with them, an interrupt from another thread ends it with
  // "interrupted". The other thread keeps interrupting until the call returns, so the flag is
  // set whenever the call starts (each call clears a stale one first).
  const char* jobs[] = {"sum(range(30000000))", "sorted(list(range(6000000)), reverse=True)[0]",
                        "len([0, 1] * 40000000)", "len(''.join(['ab'] * 8000000))", "max(range(30000000))",
                        "any([False] * 50000000)", "len('abc' * 400000000)"};
  for (const char* job : jobs) {
    DYNAMIC_SECTION(job) {
      Session s;
      std::atomic<bool> done{false};
      std::thread stopper([&] {
        while (!done.load()) {
          s.interrupt();
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
      });
      std::string shown;
      bool ok = s.eval("job", job, &shown);
      done.store(true);
      stopper.join();
      INFO(shown << s.rendered_diagnostics());
      CHECK_FALSE(ok);
      CHECK_THAT(s.rendered_diagnostics(), Catch::Contains("interrupted"));
    }
  }
}

}  // namespace tracer::test
