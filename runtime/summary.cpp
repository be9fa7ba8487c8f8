// Tensor summaries for printing results.
#include "runtime/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "runtime/kernel_util.h"

namespace tracer::rt {

// An integer element exactly (i64 values near 2^63 do not survive a double).
static int64_t int_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::i64: return t.data_as<int64_t>()[i];
    case DType::i32: return t.data_as<int32_t>()[i];
    case DType::i8: return t.data_as<int8_t>()[i];
    case DType::u8: return t.data_as<uint8_t>()[i];
    default: return t.data_as<uint8_t>()[i] != 0;  // b8
  }
}

static std::string value_str(const Tensor& t, int64_t i) {
  if (is_bool(t.dtype())) return int_at(t, i) != 0 ? "True" : "False";
  if (!is_float(t.dtype())) return fmt::format("{}", int_at(t, i));
  return fmt::format("{:.6g}", t.get(i));
}

namespace {
// Sums in chunks of a fixed size, the chunks in parallel and their partial sums in order: the
// result does not depend on the number of threads, and a tensor of one chunk sums exactly as a
// loop would. (Gigabytes of outputs, a model's saved tensors, summed one get() at a time took
// minutes.)
constexpr int64_t kChunk = int64_t{1} << 16;

template <class Acc, class F>
Acc chunked_sum(int64_t n, F&& element) {
  int64_t chunks = (n + kChunk - 1) / kChunk;
  if (chunks <= 1) {
    Acc s = 0;
    for (int64_t i = 0; i < n; ++i) s += element(i);
    return s;
  }
  std::vector<Acc> part(static_cast<size_t>(chunks), 0);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    Acc s = 0;
    for (int64_t i = c * kChunk, e = std::min(n, i + kChunk); i < e; ++i) s += element(i);
    part[static_cast<size_t>(c)] = s;
  }
  Acc s = 0;
  for (Acc p : part) s += p;
  return s;
}
}  // namespace

double sum_f64(const Tensor& t) {
  int64_t n = t.numel();
  return detail::dispatch(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* d = t.data_as<const T>();
    return chunked_sum<double>(n, [d](int64_t i) { return detail::convert<double>(d[i]); });
  });
}

std::string summarize(const Tensor& t, int max_values) {
  return summarize(t, is_float(t.dtype()) ? sum_f64(t) : 0.0, max_values);
}

std::string summarize(const Tensor& t, double float_sum, int max_values) {
  std::string out = std::string(dtype_name(t.dtype())) + shape_str(t.shape()) + " [";
  int64_t n = t.numel();
  int64_t head = n <= max_values ? n : max_values / 2;
  for (int64_t i = 0; i < head; ++i) out += (i ? ", " : "") + value_str(t, i);
  if (n > max_values) {
    out += ", ...";
    for (int64_t i = n - (max_values - head); i < n; ++i) out += ", " + value_str(t, i);
  }
  if (!is_float(t.dtype())) {  // integers sum exactly (in 128 bits: no wrap)
    __int128 sum = chunked_sum<__int128>(n, [&t](int64_t i) { return static_cast<__int128>(int_at(t, i)); });
    bool neg = sum < 0;
    unsigned __int128 m = neg ? -static_cast<unsigned __int128>(sum) : static_cast<unsigned __int128>(sum);
    std::string digits;
    do {
      digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(m % 10)));
      m /= 10;
    } while (m);
    return out + "] sum=" + (neg ? "-" : "") + digits;
  }
  return out + "] sum=" + fmt::format("{:.8g}", float_sum);
}

}  // namespace tracer::rt
