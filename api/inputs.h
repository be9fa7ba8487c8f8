// Random inputs drawn from a parameter's type, reproducibly from the seed.
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace tracer::api {

// Floats: uniform in [-1, 1); integers: uniform in [0, 16); bools: true with probability 1/2.
// Input number `index` uses Philox offset 2^32 + index, so inputs never share random bits with
// the trace's own random ops (which start at offset 0).
rt::Tensor random_input(rt::DType dt, const rt::Shape& shape, uint64_t seed, uint64_t index, rt::Allocator* al);

}  // namespace tracer::api
