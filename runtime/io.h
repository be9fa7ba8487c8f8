// Reading and writing tensors as .npy and .safetensors files.
#pragma once
#include <map>
#include <string>

#include "runtime/tensor.h"

namespace tracer::rt {

// Throws std::runtime_error with a message naming the file and what is wrong
// (bad magic, unsupported dtype, truncated data, header not parseable, Fortran order, ...).
Tensor read_npy(const std::string& path, Allocator* al = nullptr);
void write_npy(const std::string& path, const Tensor& t);
// NumPy has no bfloat16: bf16 tensors are written with descr 'bfloat16' (readable by NumPy with
// ml_dtypes installed) and read_npy accepts it back.

std::map<std::string, Tensor> read_safetensors(const std::string& path, Allocator* al = nullptr);
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors);

// Writes data to path whole or not at all: to a temporary file beside it (named by process and
// thread, so concurrent writers do not share one), then renamed into place. False with the
// reason in *err when it could not; the temporary file is removed then.
bool write_file_atomically(const std::string& path, const std::string& data, std::string* err);

}  // namespace tracer::rt
