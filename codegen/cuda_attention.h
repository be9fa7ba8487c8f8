// Flash attention on the GPU (docs/codegen.md, "Attention"): prims.attention and
// prims.attention_backward as kernels of ours, generated per dtype, padded head size and
// causality, compiled by NVRTC like every other kernel. Tensor-core products
// (mma.sync m16n8k16, f32 accumulation) over 64 x 64 tiles; the scores never leave the chip.
#pragma once
#include <cstddef>
#include <string>

#include "ir/trace.h"

namespace tracer::codegen {

struct AttentionKernel {
  std::string source;  // CUDA C++, no includes
  std::string symbol;  // the kernel's name ("tr_<hash>")
  unsigned block = 128;
  unsigned shared_bytes = 0;  // dynamic shared memory per block
};

// Whether an attention or attention_backward statement runs on these kernels (else *why):
// bf16 or f16, one head size E = Ev of at most 128, nonempty.
bool attention_on_gpu(const ir::Stmt& s, std::string* why = nullptr);
// The head size rounded up to a multiple of 16 (the products' k step).
int attention_padded(int64_t head);

// Forward: grid (ceil(L / 64), batch); (q, k, v, out, lse, int L, int S, int E, float scale * log2(e)).
AttentionKernel attention_forward_kernel(ir::DType dt, int padded, bool causal);
// Backward, per key tile: grid (ceil(S / 64), batch); (q, k, v, grad, lse, delta, dq_acc (f32,
// zeroed by the delta kernel), dk, dv, int L, int S, int E, float scale, float scale * log2(e)).
AttentionKernel attention_backward_kernel(ir::DType dt, int padded, bool causal);
// delta[r] = sum_e grad[r, e] * out[r, e] in f32, and dq_acc's row r zeroed: (grad, out, delta,
// dq_acc, long long rows, int E); 8 rows per block of 256 threads.
AttentionKernel attention_delta_kernel(ir::DType dt);
// dq[i] = dq_acc[i] * scale in the storage type: (dq_acc, dq, long long n, float scale).
AttentionKernel attention_dq_kernel(ir::DType dt);

}  // namespace tracer::codegen
