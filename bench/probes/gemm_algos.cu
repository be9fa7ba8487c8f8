// Probe: do other cuBLASLt algorithms than the heuristic's first beat it under the sustained,
// power-capped load of a training step? For each of llama_mlp's six bf16 products (row-major, as
// runtime/cuda.cpp calls cuBLASLt) it asks for up to 16 algorithms, heats the GPU with the first,
// then times each candidate against the first in alternation (40 products each, CUDA events).
// Build: nvcc -O2 -arch=sm_90 gemm_algos.cu -lcublasLt
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>

#define CK(x) do { auto s_ = (x); if ((int)s_ != 0) { printf("%s failed: %d (line %d)\n", #x, (int)s_, __LINE__); return 1; } } while (0)

struct Cfg { const char* name; bool ta, tb; long m, n, k; };

int main() {
  Cfg cfgs[] = {
      {"linear fc1 8192x11008x4096 (B^T)", false, true, 8192, 11008, 4096},
      {"linear proj 8192x4096x11008 (B^T)", false, true, 8192, 4096, 11008},
      {"dW proj 4096x11008x8192 (A^T)", true, false, 4096, 11008, 8192},
      {"dX 8192x11008x4096", false, false, 8192, 11008, 4096},
      {"dW fc 11008x4096x8192 (A^T)", true, false, 11008, 4096, 8192},
      {"dX 8192x4096x11008", false, false, 8192, 4096, 11008},
  };
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  size_t wsb = 32 << 20;
  void *ws, *a, *b, *c;
  CK(cudaMalloc(&ws, wsb));
  size_t big = 11008L * 8192 * 2;
  CK(cudaMalloc(&a, big)); CK(cudaMalloc(&b, big)); CK(cudaMalloc(&c, big));
  // Uniform-ish data: random bits in the low mantissa, exponents near 1.
  std::vector<unsigned short> h(big / 2);
  unsigned s = 1;
  for (auto& x : h) { s = s * 1664525u + 1013904223u; x = (unsigned short)(0x3f00 | ((s >> 16) & 0xff)) ^ ((s >> 8) & 0x8000); }
  CK(cudaMemcpy(a, h.data(), big, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, h.data(), big, cudaMemcpyHostToDevice));
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  float alpha = 1, beta = 0;
  for (auto& g : cfgs) {
    cublasLtMatmulDesc_t d;
    CK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t o1 = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, o2 = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &o1, sizeof o1));
    CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &o2, sizeof o2));
    long m = g.m, n = g.n, k = g.k;
    cublasLtMatrixLayout_t la, lb, lc;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, g.tb ? k : n, g.tb ? n : k, g.tb ? k : n));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, g.ta ? m : k, g.ta ? k : m, g.ta ? m : k));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, m, n));
    cublasLtMatmulPreference_t p;
    CK(cublasLtMatmulPreferenceCreate(&p));
    CK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    cublasLtMatmulHeuristicResult_t r[16];
    int found = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, d, la, lb, lc, lc, p, 16, r, &found));
    auto run = [&](int i, int reps) -> float {
      cudaEventRecord(e0, st);
      for (int j = 0; j < reps; ++j)
        if (cublasLtMatmul(lt, d, &alpha, b, la, a, lb, &beta, c, lc, c, lc, &r[i].algo, ws, wsb, st) != 0) return -1;
      cudaEventRecord(e1, st);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      return ms / reps;
    };
    run(0, 600);  // heat: reach the power cap
    double flop = 2.0 * m * n * k;
    printf("== %s: %d algorithms\n", g.name, found);
    for (int i = 0; i < found; ++i) {
      int id = 0, tile = 0, stages = 0, cl = 0;
      size_t w;
      cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
      cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
      cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
      cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof cl, &w);
      float t0 = run(0, 40), ti = run(i, 40), t0b = run(0, 40);
      float base = 0.5f * (t0 + t0b);
      printf("  #%-2d algo %3d tile %3d stages %3d cluster %2d ws %9zu: %.3f ms (%.0f TFLOP/s) vs first %.3f ms: %.3fx\n", i, id, tile,
             stages, cl, r[i].workspaceSize, ti, flop / ti / 1e9, base, ti / base);
    }
    cublasLtMatmulPreferenceDestroy(p);
    cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(d);
  }
  return 0;
}
