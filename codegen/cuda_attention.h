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

// How an attention or attention_backward statement runs on the GPU:
// - Flash: bf16 or f16 with one head size E = Ev of at most 128 (the tensor-core kernels);
// - Rows: any float dtype, head sizes up to 512: one warp per query row (forward, dq) or key row
//   (dk, dv), CUDA-core math in f32 (f64 for f64); correct and memory-lean, not fast;
// - None: empty, or too large (*why says which); it runs on the CPU.
enum class AttentionPath { None, Flash, Rows };
// Whether the statement has an attn_mask (prims.attention's sixth argument, the backward's
// ninth). cuDNN's graphs take it as a bias where it is [1 or b, 1 or h, L, S] of the I/O dtype or
// b8 (converted); the rows kernels read any other (converted to their math type, through
// per-batch offsets and query/key strides); the flash kernels take none.
bool attention_masked(const ir::Stmt& s);
AttentionPath attention_path(const ir::Stmt& s, std::string* why = nullptr);
// The same for a device of this compute capability (major) and opt-in shared memory per block:
// the flash kernels need sm_80 and their shared memory, else the rows kernels run. The executor,
// its kernel preparation and `tracer compile` all decide by it.
AttentionPath attention_path_for(const ir::Stmt& s, int compute_major, long long max_shared_bytes);
// The head size rounded up to a multiple of 16 (the products' k step).
int attention_padded(int64_t head);
// Dynamic shared memory of the flash kernels for a padded head size (bytes).
unsigned attention_forward_shared(int padded);
unsigned attention_backward_shared(int padded);

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

// The Rows path (8 warps of 256 threads per block, one row each), for heads of E and Ev values:
// forward (q, k, v, out, lse, long long rows, int L, int S, int E, int Ev, math scale, int causal);
// dq (grad, q, k, v, out, lse, delta, dq, same sizes and flags) also writes delta per query row;
// dkdv (grad, q, k, v, lse, delta, dk, dv, long long key_rows, same sizes and flags).
AttentionKernel attention_rows_forward_kernel(ir::DType dt, int64_t E, int64_t Ev);
AttentionKernel attention_rows_dq_kernel(ir::DType dt, int64_t E, int64_t Ev);
AttentionKernel attention_rows_dkdv_kernel(ir::DType dt, int64_t E, int64_t Ev);
// A mask of mask_dtype (b8 or float) as an additive one of dtype out (the rows kernels' math
// type f32 or f64, or cuDNN's I/O type bf16 or f16): out[i] for i < n.
AttentionKernel attention_mask_kernel(ir::DType mask_dtype, ir::DType out);

}  // namespace tracer::codegen
