// Helpers of the printout tests (test_files.cpp, test_thunder_printouts.cpp): print round trips,
// scratch folders, inputs given from files, sessions as one rank of a job.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/io.h"
#include "tests/support.h"
#include "tracer/session.h"

namespace tracer::test {

// Traces `entry` of a module, prints it, reads the printout back, traces and prints it again.
inline void round_trip(const std::string& name, const std::string& text, const std::string& entry,
                const std::vector<std::pair<std::string, std::string>>& sets,
                const std::map<std::string, std::string>& types = {}) {
  Session a;
  for (const auto& [k, v] : sets) a.set(k, v);
  for (const auto& [k, v] : types) REQUIRE(a.set_input_type(k, v));
  REQUIRE(a.load_string(name, text));
  auto e = a.entry(entry);
  REQUIRE(e);
  auto p1 = a.print(*e);
  INFO(a.rendered_diagnostics());
  REQUIRE(p1);
  Session b;
  bool loaded = b.load_string(name + " (printed)", *p1);
  INFO("printed trace:\n" << *p1 << b.rendered_diagnostics());
  REQUIRE(loaded);
  auto p2 = b.print(*b.entry(""));
  REQUIRE(p2);
  CHECK(*p2 == *p1);
}

// An empty scratch folder below the temporary directory.
inline std::string fresh_dir(const std::string& name) {
  const std::string dir = (std::filesystem::temp_directory_path() / name).string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// f32 values sin(seed * (i + 1)): data no two inputs share.
inline rt::Tensor sine_tensor(rt::Shape shape, double seed) {
  rt::Tensor t = rt::Tensor::empty(rt::DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, std::sin(seed * double(i + 1)));
  return t;
}

// Writes each tensor to DIR/NAME.npy and gives it to s as input NAME.
inline void give_inputs(Session& s, const std::string& dir, const std::map<std::string, rt::Tensor>& in) {
  for (const auto& [name, t] : in) {
    rt::write_npy(dir + "/" + name + ".npy", t);
    REQUIRE(s.add_input(name, dir + "/" + name + ".npy"));
  }
}

inline SessionOptions as_rank(int world_size, int rank) {
  SessionOptions o;
  o.world_size = world_size;
  o.world_rank = rank;
  return o;
}

// `tracer check` of a printout made on rank 0, as another rank of the job: it fails with `message`
// (the piece that rank holds is not the one the printout was made for).
inline void check_fails_as_rank(const std::string& file, const std::string& entry, int world_size, int rank, const std::string& message) {
  Session e(as_rank(world_size, rank));
  CHECK_FALSE(e.check_file(file, false, entry));
  CHECK_THAT(e.rendered_diagnostics(), Catch::Contains(message));
}

// Runs entry of file as rank `rank` of a job of world_size on the inputs (written below dir); returns
// this rank's outputs, read back in order (dir/out/rankR/NAME.npy).
inline std::vector<rt::Tensor> run_as_rank(const std::string& file, const std::string& entry, int world_size, int rank,
                                           const std::string& dir, const std::map<std::string, rt::Tensor>& in) {
  Session s(as_rank(world_size, rank));
  give_inputs(s, dir, in);
  REQUIRE(s.load_file(file));
  auto r = s.run(entry, dir + "/out");
  INFO(s.rendered_diagnostics());
  REQUIRE(r);
  std::vector<rt::Tensor> outs;
  for (const auto& o : r->outputs) outs.push_back(rt::read_npy(dir + "/out/rank" + std::to_string(rank) + "/" + o.name + ".npy"));
  return outs;
}

// Runs entry of file as a rank, its inputs drawn at the given types: it fails with `message`.
inline void run_fails_as_rank(const std::string& file, const std::string& entry, int world_size, int rank,
                              const std::map<std::string, std::string>& types, const std::string& message) {
  Session s(as_rank(world_size, rank));
  for (const auto& [k, v] : types) REQUIRE(s.set_input_type(k, v));
  REQUIRE(s.load_file(file));
  CHECK_FALSE(s.run(entry));
  CHECK_THAT(s.rendered_diagnostics(), Catch::Contains(message));
}

}  // namespace tracer::test
