// Probe: how fast can one AdamW step over bf16 parameters, gradients and moments run? GPT-2
// small's 124,475,904 elements (read p, g, m, v; write p, m, v: 14 bytes an element), f32
// arithmetic, coefficients read from a small f64 array as tracer's generated kernels read them.
// Variants of tracer's elementwise kernel shape (16-byte vectors, grid-stride, 256 threads):
//   base      as generated (in-place outputs, so no __restrict__ on them), grid 16 blocks an SM
//   restrict  every pointer __restrict__
//   lb8       __launch_bounds__(256, 8): at most 32 registers, full occupancy
//   ilp2      two vectors a thread an iteration (loads of both before any store)
//   onepass   one vector a thread, as many blocks as vectors (no grid-stride loop)
//   fastdiv   __fdividef and sqrtf's approximate form for the update's division
//   rw74      no arithmetic: read 4 streams, write 3 (this access pattern's ceiling)
// Build and run: nvcc -O3 -arch=sm_90 -o /tmp/adamw_probe bench/probes/adamw_probe.cu && /tmp/adamw_probe
#include <cstdio>
#include <cuda_runtime.h>

typedef unsigned short bf;
__device__ __forceinline__ float from_bf(bf h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ bf to_bf(float f) {
  unsigned int p;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(0.0f), "f"(f));
  return (bf)p;
}

template <bool FAST>
__device__ __forceinline__ void update(const double* __restrict__ k, float& p, float g, float& m, float& v) {
  const float lr = (float)k[0], b1 = (float)k[1], b2 = (float)k[2], eps = (float)k[3], lrwd = (float)k[4],
              c1 = (float)k[5], c2 = (float)k[6], ob1 = (float)k[7], ob2 = (float)k[8];
  p = p - lrwd * p;
  m = b1 * m + ob1 * g;
  v = b2 * v + ob2 * (g * g);
  if (FAST) p = p - __fdividef(lr * (m * c1), __fsqrt_rn(v) * c2 + eps);
  else p = p - lr * (m * c1) / (sqrtf(v) * c2 + eps);
}

#define RESTRICT_IF(R) R

template <int MODE>
struct Ptr { typedef bf* T; };

// MODE: 0 base, 1 restrict, 2 lb8, 3 ilp2, 4 onepass, 5 fastdiv, 6 rw74
template <int MODE>
__global__ void __launch_bounds__(256, MODE == 2 ? 8 : 1)
step(const double* __restrict__ k, const bf* pi, const bf* gi, const bf* mi, const bf* vi, bf* po, bf* mo, bf* vo, long long n) {
  const int V = 8;
  const long long nvec = n / V;
  const long long stride = MODE == 4 ? nvec : (long long)gridDim.x * blockDim.x;
  const int U = MODE == 3 ? 2 : 1;
  for (long long v0 = (long long)blockIdx.x * blockDim.x + threadIdx.x; v0 < nvec; v0 += stride * U) {
    uint4 P[U], G[U], M[U], W[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      long long v = v0 + u * stride;
      if (v < nvec) {
        P[u] = reinterpret_cast<const uint4*>(pi)[v];
        G[u] = reinterpret_cast<const uint4*>(gi)[v];
        M[u] = reinterpret_cast<const uint4*>(mi)[v];
        W[u] = reinterpret_cast<const uint4*>(vi)[v];
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      long long v = v0 + u * stride;
      if (v >= nvec) continue;
      bf* ph = reinterpret_cast<bf*>(&P[u]);
      bf* gh = reinterpret_cast<bf*>(&G[u]);
      bf* mh = reinterpret_cast<bf*>(&M[u]);
      bf* vh = reinterpret_cast<bf*>(&W[u]);
      if (MODE != 6) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          float p = from_bf(ph[j]), g = from_bf(gh[j]), m = from_bf(mh[j]), w = from_bf(vh[j]);
          update<MODE == 5>(k, p, g, m, w);
          ph[j] = to_bf(p);
          mh[j] = to_bf(m);
          vh[j] = to_bf(w);
        }
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) ph[j] ^= gh[j];
      }
      reinterpret_cast<uint4*>(po)[v] = P[u];
      reinterpret_cast<uint4*>(mo)[v] = M[u];
      reinterpret_cast<uint4*>(vo)[v] = W[u];
    }
    if (MODE == 4) break;
  }
}

template <int MODE>
__global__ void __launch_bounds__(256) step_restrict(const double* __restrict__ k, const bf* __restrict__ pi, const bf* __restrict__ gi,
                                                     const bf* __restrict__ mi, const bf* __restrict__ vi, bf* __restrict__ po,
                                                     bf* __restrict__ mo, bf* __restrict__ vo, long long n) {
  const int V = 8;
  const long long nvec = n / V;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += stride) {
    uint4 P = reinterpret_cast<const uint4*>(pi)[v], G = reinterpret_cast<const uint4*>(gi)[v],
          M = reinterpret_cast<const uint4*>(mi)[v], W = reinterpret_cast<const uint4*>(vi)[v];
    bf *ph = reinterpret_cast<bf*>(&P), *gh = reinterpret_cast<bf*>(&G), *mh = reinterpret_cast<bf*>(&M), *vh = reinterpret_cast<bf*>(&W);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float p = from_bf(ph[j]), g = from_bf(gh[j]), m = from_bf(mh[j]), w = from_bf(vh[j]);
      update<false>(k, p, g, m, w);
      ph[j] = to_bf(p);
      mh[j] = to_bf(m);
      vh[j] = to_bf(w);
    }
    reinterpret_cast<uint4*>(po)[v] = P;
    reinterpret_cast<uint4*>(mo)[v] = M;
    reinterpret_cast<uint4*>(vo)[v] = W;
  }
}

__global__ void copy(const uint4* __restrict__ a, uint4* __restrict__ b, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) b[i] = a[i];
}

int main() {
  const long long n = 124475904;
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  bf *p, *g, *m, *v;
  double* k;
  cudaMalloc(&p, n * 2);
  cudaMalloc(&g, n * 2);
  cudaMalloc(&m, n * 2);
  cudaMalloc(&v, n * 2);
  cudaMalloc(&k, 9 * sizeof(double));
  double hk[9] = {3e-4, 0.9, 0.95, 1e-8, 3e-5, 1.1, 1.05, 0.1, 0.05};
  cudaMemcpy(k, hk, sizeof hk, cudaMemcpyHostToDevice);
  cudaMemset(p, 0x3c, n * 2);
  cudaMemset(g, 0x3a, n * 2);
  cudaMemset(m, 0x38, n * 2);
  cudaMemset(v, 0x36, n * 2);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  auto time = [&](const char* name, auto launch) {
    for (int i = 0; i < 3; ++i) launch();
    cudaEventRecord(e0);
    const int reps = 20;
    for (int i = 0; i < reps; ++i) launch();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    ms /= reps;
    printf("%-10s %8.3f ms  %7.0f GB/s\n", name, ms, n * 14.0 / (ms * 1e-3) / 1e9);
  };
  long long nvec = n / 8;
  int grid = 16 * sms;
  time("base", [&] { step<0><<<grid, 256>>>(k, p, g, m, v, p, m, v, n); });
  time("restrict", [&] { step_restrict<0><<<grid, 256>>>(k, p, g, m, v, p, m, v, n); });
  time("lb8", [&] { step<2><<<grid, 256>>>(k, p, g, m, v, p, m, v, n); });
  time("ilp2", [&] { step<3><<<grid, 256>>>(k, p, g, m, v, p, m, v, n); });
  time("onepass", [&] { step<4><<<(int)((nvec + 255) / 256), 256>>>(k, p, g, m, v, p, m, v, n); });
  time("fastdiv", [&] { step<5><<<grid, 256>>>(k, p, g, m, v, p, m, v, n); });
  time("rw74", [&] { step<6><<<grid, 256>>>(k, p, g, m, v, p, m, v, n); });
  time("base g4", [&] { step<0><<<4 * sms, 256>>>(k, p, g, m, v, p, m, v, n); });
  time("base g64", [&] { step<0><<<64 * sms, 256>>>(k, p, g, m, v, p, m, v, n); });
  // The copy ceiling: 2 x 256 MiB.
  uint4 *a, *b;
  const long long cn = (256ll << 20) / 16;
  cudaMalloc(&a, cn * 16);
  cudaMalloc(&b, cn * 16);
  for (int i = 0; i < 3; ++i) copy<<<grid, 256>>>(a, b, cn);
  cudaEventRecord(e0);
  for (int i = 0; i < 20; ++i) copy<<<grid, 256>>>(a, b, cn);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  printf("%-10s %8.3f ms  %7.0f GB/s\n", "copy", ms / 20, 2.0 * cn * 16 / (ms / 20 * 1e-3) / 1e9);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) printf("error: %s\n", cudaGetErrorString(err));
  return 0;
}
