// The CUDA driver's entry points tracer uses, as runtime/cuda.cpp binds them with dlsym (the C
// types of the driver's headers, whose ABI is stable: the build needs no CUDA toolkit). Internal
// to the runtime: cuda.cpp (loading, memory, kernels, graphs, cuBLASLt) and cuda_copies.cpp
// (copies, staged uploads, pinned memory, events) share it.
#pragma once
#include "runtime/cuda.h"

namespace tracer::rt::cuda {

using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
using CUevent = void*;
using CUgraph = void*;
using CUgraphExec = void*;

struct Api {
  void* handle = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*driver_version)(int*) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_name)(char*, int, CUdevice) = nullptr;
  CUresult (*device_attr)(int*, int, CUdevice) = nullptr;
  CUresult (*primary_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*primary_release)(CUdevice) = nullptr;
  CUresult (*ctx_set)(CUcontext) = nullptr;
  CUresult (*mem_alloc)(DevPtr*, size_t) = nullptr;
  CUresult (*mem_free)(DevPtr) = nullptr;
  CUresult (*dtoh_async)(void*, DevPtr, size_t, CUstream) = nullptr;
  CUresult (*dtod_async)(DevPtr, DevPtr, size_t, CUstream) = nullptr;
  CUresult (*module_load)(CUmodule*, const void*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*module_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                     void**, void**) = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned) = nullptr;
  CUresult (*stream_destroy)(CUstream) = nullptr;
  CUresult (*stream_sync)(CUstream) = nullptr;
  CUresult (*event_create)(CUevent*, unsigned) = nullptr;
  CUresult (*event_destroy)(CUevent) = nullptr;
  CUresult (*event_record)(CUevent, CUstream) = nullptr;
  CUresult (*event_sync)(CUevent) = nullptr;
  CUresult (*event_elapsed)(float*, CUevent, CUevent) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
  CUresult (*error_name)(CUresult, const char**) = nullptr;
  CUresult (*htod_async)(DevPtr, const void*, size_t, CUstream) = nullptr;
  // CUDA graphs (stream capture).
  CUresult (*begin_capture)(CUstream, int) = nullptr;
  CUresult (*end_capture)(CUstream, CUgraph*) = nullptr;
  CUresult (*graph_instantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*graph_launch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*graph_exec_destroy)(CUgraphExec) = nullptr;
  CUresult (*graph_destroy)(CUgraph) = nullptr;
  CUresult (*graph_node_count)(CUgraph, void*, size_t*) = nullptr;
  CUresult (*func_set_attr)(void*, int, int) = nullptr;
  CUresult (*launch_host_func)(CUstream, void (*)(void*), void*) = nullptr;  // optional (timing gates)
  CUresult (*stream_wait_event)(CUstream, CUevent, unsigned) = nullptr;     // optional (the communication stream)
  // Optional (staged uploads and asynchronous reads of small results; without them, copies wait).
  CUresult (*host_alloc)(void**, size_t, unsigned) = nullptr;
  CUresult (*host_free)(void*) = nullptr;
  CUresult (*event_query)(CUevent) = nullptr;
  // The driver stays loaded for the life of the process (as NVRTC does; unloading a driver
  // while its threads may still run is not safe).
};

}  // namespace tracer::rt::cuda
