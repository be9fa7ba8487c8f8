/* A stand-in for libcuda.so.1 that runs nothing: memory is host memory, launches and graphs
 * return at once. It lets the host side of the GPU executor (the launch path, the allocator,
 * graph capture bookkeeping) be profiled on a machine without a GPU:
 *   cc -shared -fPIC -O2 -o /tmp/libfakecuda.so bench/fake_cuda/fake_cuda.c
 *   TRACER_CUDA_DRIVER=/tmp/libfakecuda.so perf record tracer run bench/launch.trace --device cuda --bench 200
 * Results computed under it are garbage; only host time means anything. Reports an sm_90
 * device named "fake" so that NVRTC compiles real kernels for it. */
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

CUresult cuInit(unsigned f) { (void)f; return 0; }
CUresult cuDriverGetVersion(int* v) { *v = 13000; return 0; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return 0; }
CUresult cuDeviceGet(int* d, int o) { *d = o; return 0; }
CUresult cuDeviceGetName(char* name, int len, int d) { (void)d; strncpy(name, "fake", (size_t)len); return 0; }
CUresult cuDeviceGetAttribute(int* v, int attr, int d) {
  (void)d;
  *v = attr == 16 ? 132 : attr == 75 ? 9 : attr == 97 ? 232448 : 0; /* SMs, cc 9.0, opt-in shared memory */
  return 0;
}
static int ctx_token;
CUresult cuDevicePrimaryCtxRetain(void** c, int d) { (void)d; *c = &ctx_token; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return 0; }
CUresult cuCtxSetCurrent(void* c) { (void)c; return 0; }
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  void* m = aligned_alloc(256, (n + 255) & ~(size_t)255);
  if (!m) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  *p = (CUdeviceptr)m;
  return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) { free((void*)p); return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* s, size_t n) { memcpy((void*)d, s, n); return 0; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, void* st) { (void)st; memcpy((void*)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void* d, CUdeviceptr s, size_t n) { memcpy(d, (void*)s, n); return 0; }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { memmove((void*)d, (void*)s, n); return 0; }
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, size_t n, void* st) { (void)st; memcpy(d, (void*)s, n); return 0; }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void* st) { (void)st; memmove((void*)d, (void*)s, n); return 0; }
static int module_token, function_token;
CUresult cuModuleLoadData(void** m, const void* image) { (void)image; *m = &module_token; return 0; }
CUresult cuModuleUnload(void* m) { (void)m; return 0; }
CUresult cuModuleGetFunction(void** f, void* m, const char* name) { (void)m; (void)name; *f = &function_token; return 0; }
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shm,
                        void* st, void** params, void** extra) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shm; (void)st; (void)params; (void)extra;
  return 0;
}
static int stream_token, event_token, graph_token, exec_token;
CUresult cuStreamCreate(void** s, unsigned f) { (void)f; *s = &stream_token; return 0; }
CUresult cuStreamDestroy_v2(void* s) { (void)s; return 0; }
CUresult cuStreamSynchronize(void* s) { (void)s; return 0; }
CUresult cuEventCreate(void** e, unsigned f) { (void)f; *e = &event_token; return 0; }
CUresult cuEventDestroy_v2(void* e) { (void)e; return 0; }
CUresult cuEventRecord(void* e, void* s) { (void)e; (void)s; return 0; }
CUresult cuEventSynchronize(void* e) { (void)e; return 0; }
CUresult cuStreamWaitEvent(void* s, void* e, unsigned f) { (void)s; (void)e; (void)f; return 0; }
CUresult cuEventElapsedTime_v2(float* ms, void* a, void* b) { (void)a; (void)b; *ms = 0; return 0; }
CUresult cuGetErrorString(CUresult rc, const char** s) { (void)rc; *s = "fake driver error"; return 0; }
CUresult cuGetErrorName(CUresult rc, const char** s) { (void)rc; *s = "CUDA_ERROR_FAKE"; return 0; }
CUresult cuStreamBeginCapture_v2(void* s, int mode) { (void)s; (void)mode; return 0; }
CUresult cuStreamEndCapture(void* s, void** g) { (void)s; *g = &graph_token; return 0; }
CUresult cuGraphInstantiateWithFlags(void** e, void* g, unsigned long long f) { (void)g; (void)f; *e = &exec_token; return 0; }
CUresult cuGraphLaunch(void* e, void* s) { (void)e; (void)s; return 0; }
CUresult cuGraphExecDestroy(void* e) { (void)e; return 0; }
CUresult cuGraphDestroy(void* g) { (void)g; return 0; }
CUresult cuGraphGetNodes(void* g, void** nodes, size_t* n) { (void)g; (void)nodes; *n = 0; return 0; }
CUresult cuFuncSetAttribute(void* f, int attr, int value) { (void)f; (void)attr; (void)value; return 0; }
