// Random inputs drawn from a parameter's type, reproducibly from the seed.
#pragma once
#include <cstdint>

#include <unordered_map>

#include "ir/trace.h"
#include "runtime/tensor.h"

namespace tracer::api {

// Floats: uniform in [-1, 1); integers: uniform in [0, bound) (16 unless index_bounds says
// less or more); bools: true with probability 1/2. Input number `index` uses Philox offset
// 2^32 + index, so inputs never share random bits with the trace's own random ops (which start
// at offset 0). The tensor holds elements start.. of that input's stream (a rank's part of one
// value the job draws).
rt::Tensor random_input(rt::DType dt, const rt::Shape& shape, uint64_t seed, uint64_t index, rt::Allocator* al,
                        int64_t bound = 16, uint64_t start = 0);

// For integer inputs used as indices, the number of valid values: class targets of a cross
// entropy or nll_loss (the logits' class count), indices of take, embedding or take_along_axis
// (the rows of the dimension they index), through reshapes of the input. The smallest where an
// input has several uses; inputs not found have no entry.
std::unordered_map<const ir::Proxy*, int64_t> index_bounds(const ir::Trace& t);

}  // namespace tracer::api
