// Tests of the runtime's matmul, Philox random numbers, and .npy / .safetensors files.
#include <catch2/catch.hpp>
#include <omp.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/io.h"
#include "runtime/kernels.h"
#include "tests/runtime/helpers.h"

using namespace tracer::rt;
using namespace tracer::rt::test;
using V = std::vector<double>;
namespace fs = std::filesystem;

namespace {
// out[b, i, j] = sum_k a[b, i, k] * b[b, k, j] in double, over an explicit batch mapping.
V naive_matmul(const V& a, const V& b, int64_t batch, int64_t M, int64_t K, int64_t N,
               const std::vector<int64_t>& abat, const std::vector<int64_t>& bbat) {
  V out(static_cast<size_t>(batch * M * N), 0.0);
  for (int64_t x = 0; x < batch; ++x)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += a[(abat[x] * M + i) * K + k] * b[(bbat[x] * K + k) * N + j];
        out[(x * M + i) * N + j] = acc;
      }
  return out;
}

double tolerance(DType dt) {
  switch (dt) {
    case DType::f64: return 1e-12;
    case DType::f32: return 1e-5;
    case DType::f16: return 2e-3;
    default: return 1e-2;
  }
}

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("tracer_rt_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string npy_bytes(const std::string& dict, const std::string& data, bool v2 = false) {
  std::string h = dict;
  size_t pre = v2 ? 12 : 10;
  while ((pre + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out = std::string("\x93NUMPY", 6) + (v2 ? std::string("\x02\x00", 2) : std::string("\x01\x00", 2));
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) out += static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

std::string safetensors_bytes(const std::string& json, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json + data;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         (a.nbytes() == 0 || std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
}
}  // namespace

TEST_CASE("matmul matches a double reference for float dtypes", "[runtime][matmul]") {
  for (DType dt : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    INFO(dtype_name(dt));
    const int64_t M = 5, K = 7, N = 3;
    Tensor a = make(dt, {M, K}, ramp(M * K, 1));
    Tensor b = make(dt, {K, N}, ramp(K * N, 2));
    Tensor c = matmul(a, b, nullptr);
    REQUIRE(c.shape() == Shape{M, N});
    REQUIRE(c.dtype() == dt);
    V ref = naive_matmul(values(a), values(b), 1, M, K, N, {0}, {0});
    V got = values(c);
    for (size_t i = 0; i < ref.size(); ++i) CHECK(got[i] == Approx(ref[i]).margin(tolerance(dt)).epsilon(tolerance(dt)));
  }
}

TEST_CASE("matmul broadcasts batch dims and handles 1-D operands", "[runtime][matmul]") {
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    Tensor a = make(dt, {2, 1, 3, 4}, ramp(24, 3));
    Tensor b = make(dt, {3, 4, 2}, ramp(24, 4));
    Tensor c = matmul(a, b, nullptr);
    REQUIRE(c.shape() == Shape{2, 3, 3, 2});
    // Output batch (i, j) uses a's matrix i and b's matrix j.
    V ref = naive_matmul(values(a), values(b), 6, 3, 4, 2, {0, 0, 0, 1, 1, 1}, {0, 1, 2, 0, 1, 2});
    V got = values(c);
    for (size_t i = 0; i < ref.size(); ++i) CHECK(got[i] == Approx(ref[i]).margin(tolerance(dt)).epsilon(tolerance(dt)));
  }
  // A shared 2-D right operand (the stacked single-gemm path).
  Tensor a = make(DType::f32, {3, 2, 4}, ramp(24, 5));
  Tensor w = make(DType::f32, {4, 3}, ramp(12, 6));
  V ref = naive_matmul(values(a), values(w), 3, 2, 4, 3, {0, 1, 2}, {0, 0, 0});
  V got = values(matmul(a, w, nullptr));
  for (size_t i = 0; i < ref.size(); ++i) CHECK(got[i] == Approx(ref[i]).margin(1e-6));

  Tensor v = make(DType::f64, {3}, {1, 2, 3});
  Tensor m = make(DType::f64, {3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor vm = matmul(v, m, nullptr);
  CHECK(vm.shape() == Shape{2});
  CHECK(values(vm) == V{22, 28});
  Tensor mv = matmul(make(DType::f64, {2, 3}, {1, 2, 3, 4, 5, 6}), v, nullptr);
  CHECK(mv.shape() == Shape{2});
  CHECK(values(mv) == V{14, 32});
  Tensor vv = matmul(v, v, nullptr);
  CHECK(vv.shape() == Shape{});
  CHECK(values(vv) == V{14});
  Tensor bv = matmul(make(DType::f32, {2, 2, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}), cast(v, DType::f32, nullptr), nullptr);
  CHECK(bv.shape() == Shape{2, 2});
  CHECK(values(bv) == V{1, 2, 3, 6});
}

TEST_CASE("matmul reads transposed operands without copies", "[runtime][matmul]") {
  // matmul(a_stored, b_stored, ta, tb) must equal matmul of the materialized transposes, for
  // every dtype path (BLAS f32/f64, f16/bf16 via f32, the integer loop), 2-D and batched.
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {{{7, 5}, {7, 3}, true, false},  {{5, 7}, {3, 7}, false, true},
                        {{7, 5}, {3, 7}, true, true},   {{2, 7, 5}, {7, 3}, true, false},
                        {{2, 5, 7}, {2, 3, 7}, false, true}, {{3, 2, 7, 5}, {2, 3, 7}, true, true}};
  for (DType dt : {DType::f64, DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64}) {
    for (const Case& c : cases) {
      INFO(dtype_name(dt) << " a" << shape_str(c.a) << (c.ta ? "^T" : "") << " b" << shape_str(c.b) << (c.tb ? "^T" : ""));
      auto vals = [&](const Shape& shape, uint32_t seed) {
        V v = ramp(static_cast<size_t>(numel(shape)), seed);
        if (!is_float(dt))
          for (double& x : v) x = std::floor(x * 10);  // small integers, not all zeros
        return v;
      };
      Tensor a = make(dt, c.a, vals(c.a, 7));
      Tensor b = make(dt, c.b, vals(c.b, 8));
      auto swap_last = [](const Tensor& t) {
        std::vector<int64_t> perm(static_cast<size_t>(t.dim()));
        for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
        std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
        return permute(t, perm, nullptr);
      };
      Tensor want = matmul(c.ta ? swap_last(a) : a, c.tb ? swap_last(b) : b, nullptr);
      Tensor got = matmul(a, b, nullptr, c.ta, c.tb);
      REQUIRE(got.shape() == want.shape());
      V w = values(want), g = values(got);
      for (size_t i = 0; i < w.size(); ++i) CHECK(g[i] == Approx(w[i]).margin(tolerance(dt)).epsilon(tolerance(dt)));
    }
  }
  CHECK_THROWS_WITH(matmul(Tensor::empty(DType::f32, {3}), Tensor::empty(DType::f32, {3, 2}), nullptr, true, false),
                    Catch::Contains("a transposed operand needs 2 dimensions"));
}

TEST_CASE("elementwise kernels write into a reused buffer, also one of their operands", "[runtime][elementwise]") {
  Tensor a = make(DType::f32, {4, 300}, ramp(1200, 9));
  Tensor b = make(DType::f32, {4, 300}, ramp(1200, 10));
  Tensor want = binary(BinaryOp::mul, a, b, DType::f32, DType::f32, nullptr);
  Tensor a_copy = cast(a, DType::f32, nullptr);
  const void* buffer = a_copy.data();
  Tensor reuse = a_copy;  // the operand itself is the buffer: out[i] = a[i] * b[i] in place
  Tensor got = binary(BinaryOp::mul, a_copy, b, DType::f32, DType::f32, nullptr, &reuse);
  CHECK(got.data() == buffer);
  CHECK(same_bytes(got, want));
  // A buffer of another shape or dtype is left alone.
  Tensor other = Tensor::empty(DType::f32, {1200});
  Tensor fresh = unary(UnaryOp::neg, a, DType::f32, nullptr, &other);
  CHECK(other.defined());
  CHECK(fresh.data() != other.data());
  Tensor wrong_dtype = Tensor::empty(DType::f64, {4, 300});
  Tensor w2 = where(cast(a, DType::b8, nullptr), a, b, DType::f32, nullptr, &wrong_dtype);
  CHECK(wrong_dtype.defined());
  CHECK(w2.data() != wrong_dtype.data());
}

TEST_CASE("matmul integers, empties and errors", "[runtime][matmul]") {
  Tensor a = make(DType::i32, {2, 2}, {1, 2, 3, 4});
  Tensor b = make(DType::i32, {2, 2}, {5, 6, 7, 8});
  Tensor c = matmul(a, b, nullptr);
  CHECK(c.dtype() == DType::i32);
  CHECK(values(c) == V{19, 22, 43, 50});
  CHECK(values(matmul(cast(a, DType::i8, nullptr), cast(b, DType::i8, nullptr), nullptr)) == V{19, 22, 43, 50});
  Tensor z = matmul(Tensor::empty(DType::f32, {2, 0}), Tensor::empty(DType::f32, {0, 3}), nullptr);
  CHECK(z.shape() == Shape{2, 3});
  CHECK(values(z) == V{0, 0, 0, 0, 0, 0});
  CHECK(matmul(Tensor::empty(DType::f32, {0, 4}), Tensor::empty(DType::f32, {4, 3}), nullptr).shape() == Shape{0, 3});
  CHECK_THROWS_WITH(matmul(Tensor::empty(DType::f32, {2, 3}), Tensor::empty(DType::f32, {4, 5}), nullptr),
                    "matmul: shapes [2, 3] and [4, 5] are incompatible (3 != 4)");
  CHECK_THROWS_AS(matmul(Tensor::empty(DType::f32, {2, 3}), Tensor::empty(DType::f64, {3, 5}), nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(matmul(Tensor::empty(DType::b8, {2, 2}), Tensor::empty(DType::b8, {2, 2}), nullptr),
                  std::invalid_argument);
  CHECK_THROWS_WITH(matmul(Tensor::empty(DType::f32, {2, 2, 3}), Tensor::empty(DType::f32, {3, 3, 1}), nullptr),
                    Catch::Contains("[2, 2, 3]") && Catch::Contains("[3, 3, 1]"));
}

TEST_CASE("philox4x32-10 known-answer vectors", "[runtime][random]") {
  auto run = [](std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
    std::array<uint32_t, 4> out{};
    philox4x32_10(c.data(), k.data(), out.data());
    return out;
  };
  using A4 = std::array<uint32_t, 4>;
  CHECK(run({0, 0, 0, 0}, {0, 0}) == A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(run({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(run({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("uniform_philox maps elements to counters as documented", "[runtime][random]") {
  const uint64_t seed = 0x123456789abcdefull, offset = 0x1122334455ull;
  Tensor t = uniform_philox({3, 5}, -2.0, 3.0, DType::f32, seed, offset, nullptr);
  const uint32_t key[2] = {0x89abcdef, 0x01234567};
  for (int64_t i : {0, 5, 14}) {
    uint64_t j = static_cast<uint64_t>(i / 4);
    const uint32_t ctr[4] = {static_cast<uint32_t>(j), 0, 0x22334455, 0x11};
    uint32_t r[4];
    philox4x32_10(ctr, key, r);
    float u = static_cast<float>(r[i % 4] >> 8) * (1.0f / 16777216.0f);
    CHECK(t.data_as<float>()[i] == -2.0f + 5.0f * u);
  }
  V v = values(t);
  CHECK(std::all_of(v.begin(), v.end(), [](double x) { return x >= -2 && x < 3; }));
  Tensor other = uniform_philox({3, 5}, -2.0, 3.0, DType::f32, seed, offset + 1, nullptr);
  CHECK_FALSE(same_bytes(t, other));
  Tensor d = uniform_philox({1000}, 0, 1, DType::f64, 7, 0, nullptr);
  V dv = values(d);
  double mean = 0;
  for (double x : dv) mean += x / 1000;
  CHECK(mean == Approx(0.5).margin(0.05));
}

TEST_CASE("uniform_philox does not depend on the thread count", "[runtime][random]") {
  int saved = omp_get_max_threads();
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    omp_set_num_threads(1);
    Tensor one = uniform_philox({100003}, -1, 1, dt, 42, 3, nullptr);
    omp_set_num_threads(2);
    Tensor two = uniform_philox({100003}, -1, 1, dt, 42, 3, nullptr);
    CHECK(same_bytes(one, two));
  }
  omp_set_num_threads(saved);
}

TEST_CASE("npy round trips every dtype", "[runtime][io]") {
  fs::path dir = temp_dir();
  for (int i = 0; i < kDTypeCount; ++i) {
    DType dt = static_cast<DType>(i);
    INFO(dtype_name(dt));
    V vals = ramp(24, static_cast<uint32_t>(i));
    for (auto& x : vals) x = std::round(x * 100);
    Tensor t = make(dt, {2, 3, 4}, vals);
    std::string path = (dir / (std::string(dtype_name(dt)) + ".npy")).string();
    write_npy(path, t);
    CHECK(fs::file_size(path) % 64 == static_cast<uintmax_t>(t.nbytes()) % 64);
    CHECK(same_bytes(read_npy(path), t));
  }
  for (Shape s : {Shape{}, Shape{0, 3}, Shape{7}}) {
    Tensor t = full(s, sf(2.5), DType::f32, nullptr);
    write_npy((dir / "s.npy").string(), t);
    CHECK(same_bytes(read_npy((dir / "s.npy").string()), t));
  }
  fs::remove_all(dir);
}

TEST_CASE("npy header parsing and malformed files", "[runtime][io]") {
  fs::path dir = temp_dir();
  std::string p = (dir / "x.npy").string();
  std::string data(24, '\0');
  for (int i = 0; i < 6; ++i) {
    float f = static_cast<float>(i);
    std::memcpy(&data[4 * i], &f, 4);
  }
  // Version 2.0, double quotes, odd spacing, Python 2 long, keys in another order.
  write_bytes(p, npy_bytes("{ \"shape\" : (2L, 3,) ,'fortran_order':False,  'descr':'<f4' }", data, true));
  Tensor t = read_npy(p);
  CHECK(t.shape() == Shape{2, 3});
  CHECK(values(t) == V{0, 1, 2, 3, 4, 5});
  write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data));
  CHECK_THROWS_WITH(read_npy(p), Catch::Contains(p) && Catch::Contains("Fortran"));
  write_bytes(p, npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", data));
  CHECK_THROWS_WITH(read_npy(p), Catch::Contains("big-endian"));
  write_bytes(p, npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", data));
  CHECK_THROWS_WITH(read_npy(p), Catch::Contains("unsupported dtype"));
  write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (100,), }", data.substr(0, 12)));
  CHECK_THROWS_WITH(read_npy(p), p + ": truncated data: expected 400 bytes, found 12");
  write_bytes(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", data));
  CHECK_THROWS_WITH(read_npy(p), Catch::Contains("header not parseable"));
  write_bytes(p, "\x93NUMPX\x01\x00" + std::string(100, ' '));
  CHECK_THROWS_WITH(read_npy(p), Catch::Contains("bad magic"));
  write_bytes(p, std::string("\x93NUMPY\x01\x00\xff\x00{", 11));
  CHECK_THROWS_WITH(read_npy(p), Catch::Contains("truncated header"));
  CHECK_THROWS_AS(read_npy((dir / "missing.npy").string()), std::runtime_error);
  fs::remove_all(dir);
}

TEST_CASE("safetensors round trips every dtype", "[runtime][io]") {
  fs::path dir = temp_dir();
  std::map<std::string, Tensor> ts;
  for (int i = 0; i < kDTypeCount; ++i) {
    DType dt = static_cast<DType>(i);
    V vals = ramp(6, static_cast<uint32_t>(i + 10));
    for (auto& x : vals) x = std::round(x * 50);
    ts[std::string("t_") + dtype_name(dt)] = make(dt, {3, 2}, vals);
  }
  ts["scalar"] = full({}, sf(4), DType::f64, nullptr);
  ts["empty"] = Tensor::empty(DType::f32, {0, 4});
  std::string p = (dir / "m.safetensors").string();
  write_safetensors(p, ts);
  auto back = read_safetensors(p);
  REQUIRE(back.size() == ts.size());
  for (const auto& [name, t] : ts) {
    INFO(name);
    REQUIRE(back.count(name) == 1);
    CHECK(same_bytes(back.at(name), t));
  }
  fs::remove_all(dir);
}

TEST_CASE("safetensors headers: metadata and malformed files", "[runtime][io]") {
  fs::path dir = temp_dir();
  std::string p = (dir / "x.safetensors").string();
  std::string data(8, '\0');
  data[0] = 1;
  data[4] = 2;
  write_bytes(p, safetensors_bytes(R"({"__metadata__":{"format":"pt"},"w":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", data));
  auto m = read_safetensors(p);
  REQUIRE(m.size() == 1);
  CHECK(values(m.at("w")) == V{1, 2});

  write_bytes(p, safetensors_bytes(R"({"w":{"dtype":"I32","shape":[2],"data_offsets":[0,8]})", data));
  CHECK_THROWS_WITH(read_safetensors(p), Catch::Contains(p) && Catch::Contains("JSON"));
  write_bytes(p, safetensors_bytes(R"({"w":{"dtype":"I32","shape":[2],"data_offsets":[4,12]}})", data));
  CHECK_THROWS_WITH(read_safetensors(p), Catch::Contains("tensor 'w'") && Catch::Contains("outside"));
  write_bytes(p, safetensors_bytes(R"({"w":{"dtype":"I32","shape":[3],"data_offsets":[0,8]}})", data));
  CHECK_THROWS_WITH(read_safetensors(p), Catch::Contains("tensor 'w'") && Catch::Contains("needs 12"));
  write_bytes(p, safetensors_bytes(R"({"w":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", data));
  CHECK_THROWS_WITH(read_safetensors(p), Catch::Contains("unsupported dtype 'C64'"));
  write_bytes(p, safetensors_bytes(R"({"w":{"dtype":"I32","shape":[2]}})", data));
  CHECK_THROWS_WITH(read_safetensors(p), Catch::Contains("data_offsets"));
  // Header length pointing past the end, and a file too short to hold it.
  write_bytes(p, safetensors_bytes(R"({"w":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", data).substr(0, 40));
  CHECK_THROWS_WITH(read_safetensors(p), Catch::Contains("exceeds the file size"));
  write_bytes(p, std::string("\x05\x00", 2));
  CHECK_THROWS_WITH(read_safetensors(p), Catch::Contains("truncated header length"));
  fs::remove_all(dir);
}
