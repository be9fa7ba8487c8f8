// Helpers shared by cuda_reduce.cpp and cuda_gathers.cpp (not part of cuda_reduce.h's interface).
#pragma once
#include <sstream>
#include <string>

#include "codegen/cuda_reduce.h"

namespace tracer::codegen::reduce_detail {
// Load to the accumulator type (double for floats, long long for integers and bools).
std::string load(rt::DType d, const std::string& ref);
// A kernel made of src over n threads, named by its text.
void finish(SimpleKernel* k, std::ostringstream& src, long long n);
}  // namespace tracer::codegen::reduce_detail
