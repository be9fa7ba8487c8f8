// The C API's tensors: creation (copied or borrowed), access, and DLPack in and out.
#include "api/c_api_impl.h"

using namespace tracer::capi;

namespace {

// DLPack export: the managed tensor keeps a reference to the handle.
struct DLExport {
  DLManagedTensor m{};
  tracer_tensor* t = nullptr;
  std::vector<int64_t> shape;
};

bool dl_dtype(rt::DType d, DLDataType* out) {
  switch (d) {
    case rt::DType::f32: *out = {kDLFloat, 32, 1}; return true;
    case rt::DType::f64: *out = {kDLFloat, 64, 1}; return true;
    case rt::DType::f16: *out = {kDLFloat, 16, 1}; return true;
    case rt::DType::bf16: *out = {kDLBfloat, 16, 1}; return true;
    case rt::DType::i8: *out = {kDLInt, 8, 1}; return true;
    case rt::DType::u8: *out = {kDLUInt, 8, 1}; return true;
    case rt::DType::i32: *out = {kDLInt, 32, 1}; return true;
    case rt::DType::i64: *out = {kDLInt, 64, 1}; return true;
    case rt::DType::b8: *out = {kDLUInt, 8, 1}; return true;  // DLPack 0.6 has no bool: one byte, 0 or 1
  }
  return false;
}

bool from_dl_dtype(DLDataType d, rt::DType* out) {
  if (d.lanes != 1) return false;
  if (d.code == kDLFloat && d.bits == 32) *out = rt::DType::f32;
  else if (d.code == kDLFloat && d.bits == 64) *out = rt::DType::f64;
  else if (d.code == kDLFloat && d.bits == 16) *out = rt::DType::f16;
  else if (d.code == kDLBfloat && d.bits == 16) *out = rt::DType::bf16;
  else if (d.code == kDLInt && d.bits == 8) *out = rt::DType::i8;
  else if (d.code == kDLUInt && d.bits == 8) *out = rt::DType::u8;
  else if (d.code == kDLInt && d.bits == 32) *out = rt::DType::i32;
  else if (d.code == kDLInt && d.bits == 64) *out = rt::DType::i64;
#if DLPACK_VERSION >= 80
  else if (d.code == kDLBool && d.bits == 8) *out = rt::DType::b8;
#endif
  else return false;
  return true;
}

}  // namespace

extern "C" {

const char* tracer_dtype_name(tracer_dtype dt) {
  rt::DType d;
  return dtype_from_c(dt, &d) ? rt::dtype_name(d) : "?";
}

size_t tracer_dtype_size(tracer_dtype dt) {
  rt::DType d;
  return dtype_from_c(dt, &d) ? rt::dtype_size(d) : 0;
}

tracer_status tracer_tensor_new(tracer_state* S, tracer_dtype dt, int ndim, const int64_t* shape, const void* data,
                                tracer_tensor** out) {
  return guarded(S, [&] {
    rt::DType d;
    rt::Shape sh;
    tracer_status st = tensor_type(S, "tracer_tensor_new", dt, ndim, shape, out, &d, &sh);
    if (st != TRACER_OK) return st;
    rt::Tensor t = rt::Tensor::zeros(d, sh, &S->impl->in->allocator());
    if (data && t.nbytes()) std::memcpy(t.data(), data, t.nbytes());
    *out = new_handle(S, std::move(t));
    return TRACER_OK;
  });
}

tracer_status tracer_tensor_borrow(tracer_state* S, tracer_dtype dt, int ndim, const int64_t* shape, void* data,
                                   void (*release)(void*), void* ctx, tracer_tensor** out) {
  return guarded(S, [&] {
    rt::DType d;
    rt::Shape sh;
    tracer_status st = tensor_type(S, "tracer_tensor_borrow", dt, ndim, shape, out, &d, &sh);
    if (st != TRACER_OK) return st;
    if (!data && rt::numel(sh) > 0) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_tensor_borrow: data is null");
    if (reinterpret_cast<uintptr_t>(data) % rt::dtype_size(d) != 0)
      return fail(S, TRACER_ERROR_ARGUMENT, std::string("tracer_tensor_borrow: data is not aligned to the size of ") + rt::dtype_name(d));
    // Armed once the handle exists: a failure (even out of memory making the handle) leaves the
    // memory the host's, and release is not called.
    auto armed = std::make_shared<bool>(false);
    std::function<void()> rel;
    if (release) rel = [release, ctx, armed] {
      if (*armed) release(ctx);
    };
    *out = new_handle(S, rt::Tensor::borrow(d, sh, data, std::move(rel)));
    *armed = true;
    return TRACER_OK;
  });
}

void tracer_tensor_retain(tracer_tensor* t) {
  if (t) t->refs.fetch_add(1);
}

void tracer_tensor_release(tracer_tensor* t) {
  if (!t || t->refs.fetch_sub(1) != 1) return;
  tracer_state* S = t->S;
  delete t;
  state_unref(S);
}

tracer_dtype tracer_tensor_dtype(const tracer_tensor* t) { return t ? dtype_to_c(t->t.dtype()) : TRACER_F32; }
int tracer_tensor_ndim(const tracer_tensor* t) { return t ? static_cast<int>(t->shape.size()) : 0; }
const int64_t* tracer_tensor_shape(const tracer_tensor* t) { return t ? t->shape.data() : nullptr; }
int64_t tracer_tensor_numel(const tracer_tensor* t) { return t ? t->t.numel() : 0; }
size_t tracer_tensor_nbytes(const tracer_tensor* t) { return t ? t->t.nbytes() : 0; }
const void* tracer_tensor_data(const tracer_tensor* t) { return t ? t->t.data() : nullptr; }
void* tracer_tensor_mutable_data(tracer_tensor* t) {
  return t && t->refs.load() == 1 && t->t.sole_owner() ? t->t.data() : nullptr;
}

tracer_status tracer_tensor_from_dlpack(tracer_state* S, DLManagedTensor* m, tracer_tensor** out) {
  // m is owned from here on: its deleter runs exactly once, when the tensor goes or at a failure
  // (also one inside new_handle, after the storage already holds it).
  auto done = std::make_shared<bool>(false);
  auto drop = [m, done] {
    if (m && m->deleter && !*done) {
      *done = true;
      m->deleter(m);
    }
  };
  if (!S) {
    drop();
    return TRACER_ERROR_ARGUMENT;
  }
  tracer_status st = guarded(S, [&] {
    if (!out || !m) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_tensor_from_dlpack: m and out must be given");
    *out = nullptr;
    const DLTensor& t = m->dl_tensor;
    if (t.device.device_type != kDLCPU)
      return fail(S, TRACER_ERROR_UNSUPPORTED, "a DLPack tensor on device type " + std::to_string(t.device.device_type) +
                                                   ": only CPU tensors (kDLCPU) can be shared");
    rt::DType d;
    if (!from_dl_dtype(t.dtype, &d))
      return fail(S, TRACER_ERROR_UNSUPPORTED, "a DLPack tensor of dtype code " + std::to_string(t.dtype.code) + ", " +
                                                   std::to_string(t.dtype.bits) + " bits, " + std::to_string(t.dtype.lanes) +
                                                   " lanes has no tracer dtype");
    rt::Shape sh;
    std::string why;
    if (!shape_from_c(t.ndim, t.shape, &sh, &why)) return fail(S, TRACER_ERROR_ARGUMENT, "DLPack tensor: " + why);
    if (t.strides) {
      int64_t expect = 1;
      for (int i = t.ndim - 1; i >= 0; --i) {
        if (sh[i] != 1 && t.strides[i] != expect)
          return fail(S, TRACER_ERROR_UNSUPPORTED, "a DLPack tensor with strides that are not compact row-major: "
                                                       "copy it to a contiguous tensor first");
        expect *= sh[i];
      }
    }
    char* data = static_cast<char*>(t.data) + t.byte_offset;
    if (!data && rt::numel(sh) > 0) return fail(S, TRACER_ERROR_ARGUMENT, "a DLPack tensor with null data");
    if (reinterpret_cast<uintptr_t>(data) % rt::dtype_size(d) != 0)
      return fail(S, TRACER_ERROR_UNSUPPORTED, "a DLPack tensor whose data is not aligned to its element size");
    *out = new_handle(S, rt::Tensor::borrow(d, sh, data, drop));
    return TRACER_OK;
  });
  if (st != TRACER_OK) drop();
  return st;
}

tracer_status tracer_tensor_to_dlpack(tracer_tensor* t, DLManagedTensor** out) {
  if (!t || !out) return TRACER_ERROR_ARGUMENT;
  *out = nullptr;
  try {
    auto e = std::make_unique<DLExport>();
    e->shape = t->shape;
    e->t = t;
    DLTensor& d = e->m.dl_tensor;
    d.data = const_cast<void*>(t->t.data());
    d.device = {kDLCPU, 0};
    d.ndim = static_cast<int>(e->shape.size());
    dl_dtype(t->t.dtype(), &d.dtype);
    d.shape = e->shape.data();
    d.strides = nullptr;
    d.byte_offset = 0;
    e->m.manager_ctx = e.get();
    e->m.deleter = [](DLManagedTensor* self) {
      auto* x = static_cast<DLExport*>(self->manager_ctx);
      tracer_tensor_release(x->t);
      delete x;
    };
    tracer_tensor_retain(t);  // nothing can fail after this
    DLExport* raw = e.release();
    *out = &raw->m;
    return TRACER_OK;
  } catch (...) {
    return TRACER_ERROR_MEMORY;
  }
}

}  // extern "C"
