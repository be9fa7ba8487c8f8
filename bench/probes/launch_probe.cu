// Probe: the floor of host time per kernel launch on this machine. Launches an empty kernel
// (and one with eight pointer arguments) 20000 times back to back on a non-blocking stream,
// through the runtime API and through the driver's cuLaunchKernel, and prints the host time per
// launch. Build: nvcc -O2 -arch=sm_90 launch_probe.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>

__global__ void empty0() {}
__global__ void empty8(float* a, float* b, float* c, float* d, float* e, float* f, float* g, long long n) {
  if (n < 0) a[0] = b[0] + c[0] + d[0] + e[0] + f[0] + g[0];
}

int main() {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  float* p;
  cudaMalloc(&p, 1024);
  const int N = 20000;
  auto per = [&](auto&& f) {
    for (int i = 0; i < 1000; ++i) f();
    cudaStreamSynchronize(s);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < N; ++i) f();
    auto t1 = std::chrono::steady_clock::now();
    cudaStreamSynchronize(s);
    auto t2 = std::chrono::steady_clock::now();
    printf("  host %.3f us per launch, wall %.3f us per kernel\n", std::chrono::duration<double, std::micro>(t1 - t0).count() / N,
           std::chrono::duration<double, std::micro>(t2 - t0).count() / N);
  };
  printf("runtime API, empty kernel:\n");
  per([&] { empty0<<<1, 32, 0, s>>>(); });
  printf("runtime API, 8 arguments, 8 blocks of 256:\n");
  per([&] { empty8<<<8, 256, 0, s>>>(p, p, p, p, p, p, p, 256); });
  CUfunction fn;
  cudaGetFuncBySymbol(&fn, (const void*)empty8);
  long long n = 256;
  void* args[] = {&p, &p, &p, &p, &p, &p, &p, &n};
  printf("cuLaunchKernel, 8 arguments:\n");
  per([&] { cuLaunchKernel(fn, 8, 1, 1, 256, 1, 1, 0, (CUstream)s, args, nullptr); });
  struct { float* q[7]; long long n; } buf = {{p, p, p, p, p, p, p}, 256};
  size_t sz = sizeof buf;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &sz, CU_LAUNCH_PARAM_END};
  printf("cuLaunchKernel, 8 arguments as one buffer (extra):\n");
  per([&] { cuLaunchKernel(fn, 8, 1, 1, 256, 1, 1, 0, (CUstream)s, nullptr, extra); });
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
