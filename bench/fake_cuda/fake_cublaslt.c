/* A stand-in for libcublasLt.so that computes nothing, beside fake_cuda.c: with it the host path
 * of programs with matmuls (a training step) can be profiled on a machine without a GPU:
 *   cc -shared -fPIC -O2 -o /tmp/fakelt/libcublasLt.so.13 bench/fake_cuda/fake_cublaslt.c
 *   LD_LIBRARY_PATH=/tmp/fakelt TRACER_CUDA_DRIVER=/tmp/libfakecuda.so TRACER_MATMUL_TUNE=0 \
 *     perf record tracer run bench/train_phases.trace ...
 * Every call succeeds; the heuristic offers one algorithm; a matmul returns at once. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int Status;
static int token;
Status cublasLtCreate(void** h) { *h = &token; return 0; }
Status cublasLtDestroy(void* h) { (void)h; return 0; }
Status cublasLtMatmulDescCreate(void** d, int c, int s) { (void)c; (void)s; *d = malloc(64); return 0; }
Status cublasLtMatmulDescDestroy(void* d) { free(d); return 0; }
Status cublasLtMatmulDescSetAttribute(void* d, int a, const void* v, size_t n) { (void)d; (void)a; (void)v; (void)n; return 0; }
Status cublasLtMatrixLayoutCreate(void** l, int t, uint64_t r, uint64_t c, int64_t ld) {
  (void)t; (void)r; (void)c; (void)ld;
  *l = malloc(64);
  return 0;
}
Status cublasLtMatrixLayoutDestroy(void* l) { free(l); return 0; }
Status cublasLtMatrixLayoutSetAttribute(void* l, int a, const void* v, size_t n) { (void)l; (void)a; (void)v; (void)n; return 0; }
Status cublasLtMatmulPreferenceCreate(void** p) { *p = malloc(64); return 0; }
Status cublasLtMatmulPreferenceDestroy(void* p) { free(p); return 0; }
Status cublasLtMatmulPreferenceSetAttribute(void* p, int a, const void* v, size_t n) { (void)p; (void)a; (void)v; (void)n; return 0; }
struct Heuristic { uint64_t algo[8]; size_t workspace; int state; float waves; int reserved[4]; };
Status cublasLtMatmulAlgoGetHeuristic(void* h, void* d, void* a, void* b, void* c, void* dd, void* p, int wanted,
                                      struct Heuristic* out, int* found) {
  (void)h; (void)d; (void)a; (void)b; (void)c; (void)dd; (void)p;
  if (wanted < 1) { *found = 0; return 0; }
  memset(out, 0, sizeof *out);
  out->waves = 1.0f;
  *found = 1;
  return 0;
}
Status cublasLtMatmul(void* h, void* d, const void* alpha, const void* A, void* la, const void* B, void* lb, const void* beta,
                      const void* C, void* lc, void* D, void* ld, const void* algo, void* ws, size_t wss, void* stream) {
  (void)h; (void)d; (void)alpha; (void)A; (void)la; (void)B; (void)lb; (void)beta; (void)C; (void)lc; (void)D; (void)ld;
  (void)algo; (void)ws; (void)wss; (void)stream;
  return 0;
}
size_t cublasLtGetVersion(void) { return 130000; }
