// Helpers of the codegen tests (test_codegen*.cpp).
#pragma once
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "codegen/cuda_codegen.h"
#include "interpreter/passes.h"
#include "tests/support.h"

namespace tracer::test {

// The CUDA source generated for one function's statements (after fuse), by name of kernel.
inline std::vector<codegen::Kernel> kernels_of(const std::string& source, const std::string& entry) {
  SourceManager sm;
  interp::Interpreter in{sm};
  DiagnosticList diags;
  auto m = in.load("m.trace", source, diags);
  REQUIRE(m);
  auto t = in.trace(*m->globals.at(entry).as<interp::FunctionObj>(), {});
  interp::Traces fused = interp::run_passes(in, {t}, {"fuse"}, {}, nullptr);
  return codegen::kernels_for(*fused[0]);
}

}  // namespace tracer::test
