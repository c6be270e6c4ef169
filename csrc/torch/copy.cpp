// The copy and storage interface: copies between host and device and on the device, the
// storage ops (empty, resize_, set_) and the view ops, which touch metadata only. See glue.h.
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include <algorithm>

#include "torch/glue.h"

namespace tp_glue {

// ---- copies, views, storage ops ----

// A tpu tensor of a dtype the C core does not know (complex32, uint16, ...) is kept as bytes, so it can
// still be stored and moved: ops on it run on CPU through the fallback. Such a tensor is read and
// written through the run of storage bytes it reaches, from its first element to its last.
int64_t element_span(const at::Tensor& t) {
  int64_t span = 1;
  for (int64_t i = 0; i < t.dim(); i++) span += (t.size(i) - 1) * t.stride(i);
  return span;
}

tp_view_t byte_span(const at::Tensor& t) {
  int64_t item = static_cast<int64_t>(t.itemsize());
  tp_view_t v{};
  v.storage = storage_of(t, &v.offset);
  v.dtype = TP_DTYPE_U8;
  v.ndim = 1;
  v.sizes[0] = element_span(t) * item;
  v.strides[0] = 1;
  return v;
}

// A tensor's lazy conjugate and negative bits are not in its bytes: its values are |host| with
// the bits of |t| applied (both bits are involutions, so this converts either way).
at::Tensor with_bits_of(const at::Tensor& t, at::Tensor host) {
  if (t.is_conj()) host = host.conj();
  if (t.is_neg()) host = host._neg_view();
  return host;
}

// The values of such a tpu tensor (any strides) as a CPU tensor: a strided view of its span. It
// must not go through .cpu(), which resolves the bits with a clone on tpu: a copy_ again.
at::Tensor bytes_to_host(const at::Tensor& src) {
  at::Tensor span = at::empty({element_span(src)}, src.options().device(c10::kCPU));
  tp_view_t s = byte_span(src);
  check(tp_eager_copy_to_host(&s, span.data_ptr()));
  return with_bits_of(src, span.as_strided(src.sizes(), src.strides(), 0));
}

// Writes |host| (dst's dtype, broadcastable to its sizes) into such a tpu tensor. A strided |dst|
// rewrites the whole span it reaches, so the bytes between its elements are read first and kept.
void bytes_from_host(const at::Tensor& dst, const at::Tensor& host) {
  at::Tensor span = dst.is_contiguous() ? at::empty({dst.numel()}, host.options())
                                        : bytes_to_host(dst).as_strided({element_span(dst)}, {1}, 0);
  span.as_strided(dst.sizes(), dst.strides(), 0).copy_(with_bits_of(dst, host));
  tp_view_t d = byte_span(dst);
  check(tp_eager_copy_from_host(&d, span.data_ptr()));
}

// A tpu tensor that fills its storage densely in another dim order than row-major (a
// channels-last one): |flat| becomes its storage as the run of elements in memory order, which a
// host tensor of the same strides holds alike, so a copy moves the bytes as they are.
bool storage_order(const tp_view_t& v, tp_view_t* flat) {
  if (tp_view_is_whole(&v) || !tp_view_is_whole_permuted(&v, nullptr)) return false;
  *flat = v;
  flat->ndim = 1;
  flat->sizes[0] = tp_view_numel(&v);
  flat->strides[0] = 1;
  return true;
}

at::Tensor& tpu_copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (self.numel() == 0) return self;
  bool dst_tpu = self.device().type() == DeviceType::PrivateUse1;
  bool src_tpu = src.device().type() == DeviceType::PrivateUse1;
  if (to_tp(self.scalar_type()) == TP_DTYPE_INVALID || to_tp(src.scalar_type()) == TP_DTYPE_INVALID) {
    if (dst_tpu && src_tpu && self.scalar_type() == src.scalar_type() && self.sizes() == src.sizes() &&
        self.is_contiguous() && src.is_contiguous() && self.is_conj() == src.is_conj() &&
        self.is_neg() == src.is_neg()) {
      tp_view_t d = byte_span(self), s = byte_span(src);
      check(tp_eager_copy(&d, &s));
    } else if (dst_tpu && src_tpu) {
      // Converting, broadcasting or strided: the device cannot compute on these bytes, so the
      // copy goes through the host, counted as a fallback like any op that runs on CPU.
      note_fallback("copy_");
      self.copy_(to_tp(src.scalar_type()) == TP_DTYPE_INVALID ? bytes_to_host(src) : src.cpu());
    } else if (dst_tpu) {
      TORCH_CHECK(src.device().is_cpu(), "copy_: cannot copy from ", src.device(), " to tpu");
      bytes_from_host(self, src.to(self.scalar_type()));
    } else {
      TORCH_CHECK(self.device().is_cpu(), "copy_: cannot copy from tpu to ", self.device());
      self.copy_(bytes_to_host(src));
    }
    return self;
  }
  // Lazy conjugate/negative bits are not in the bytes: a copy between tensors whose bits differ
  // conjugates/negates the values it moves, as PyTorch's own copy_ does.
  if (dst_tpu && src_tpu) {
    tp_view_t d = view_or_throw(self, "copy_"), s = view_or_throw(src, "copy_");
    check(tp_eager_copy_bits(&d, &s, self.is_conj() != src.is_conj(), self.is_neg() != src.is_neg()));
  } else if (dst_tpu) {
    TORCH_CHECK(src.device().is_cpu(), "copy_: cannot copy from ", src.device(), " to tpu");
    tp_view_t d = view_or_throw(self, "copy_"), flat;
    at::Tensor host = with_bits_of(self, src.to(self.scalar_type()).expand(self.sizes()))
                          .resolve_conj().resolve_neg();
    if (storage_order(d, &flat) && host.strides() == self.strides())
      d = flat;  // channels-last to channels-last: no reordering on either side
    else
      host = host.contiguous();
    // non_blocking from pinned memory read in place: returns once enqueued, as on CUDA (the
    // caller may not change the source until it synchronizes; freeing it waits for the copy).
    if (non_blocking && host.data_ptr() == src.data_ptr() && is_pinned(host.data_ptr())) {
      PJRT_Event* read = nullptr;
      check(tp_eager_copy_from_host_async(&d, host.data_ptr(), &read));
      if (read && !note_pinned_read(host.data_ptr(), read))
        check(tp_event_await(client(), read));
      return self;
    }
    check(tp_eager_copy_from_host(&d, host.data_ptr()));
  } else {
    TORCH_CHECK(self.device().is_cpu(), "copy_: cannot copy from tpu to ", self.device());
    tp_view_t s = view_or_throw(src, "copy_"), flat;
    if (self.scalar_type() == src.scalar_type() && self.sizes() == src.sizes() &&
        self.is_contiguous() && self.is_conj() == src.is_conj() && self.is_neg() == src.is_neg()) {
      // Into the destination itself (src.cpu(), a collective's host copy): no staging buffer.
      check(tp_eager_copy_to_host(&s, self.data_ptr()));
      return self;
    }
    const bool as_stored = storage_order(s, &flat);
    at::Tensor host = as_stored ? at::empty_strided(src.sizes(), src.strides(), src.options().device(c10::kCPU))
                                : at::empty(src.sizes(), src.options().device(c10::kCPU));
    check(tp_eager_copy_to_host(as_stored ? &flat : &s, host.data_ptr()));
    self.copy_(with_bits_of(src, host));
  }
  return self;
}

at::Tensor tpu_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor d = dst;
  tpu_copy_(d, self, non_blocking);
  return dst;
}

at::Tensor tpu_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_output(dst, self.sizes());
  return tpu_copy_from(self, dst, false);
}

c10::Scalar tpu_local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  if (to_tp(self.scalar_type()) == TP_DTYPE_INVALID) return at::_local_scalar_dense(bytes_to_host(self));
  tp_view_t v = view_or_throw(self, "item");
  at::Tensor host = at::empty({}, self.options().device(c10::kCPU));
  v.ndim = 0;
  check(tp_eager_copy_to_host(&v, host.data_ptr()));
  return at::_local_scalar_dense(with_bits_of(self, host).resolve_conj().resolve_neg());
}

at::Tensor tpu_empty(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                     std::optional<c10::Layout>, std::optional<c10::Device> device,
                     std::optional<bool>, std::optional<c10::MemoryFormat> fmt) {
  c10::Device dev = device.value_or(c10::Device(DeviceType::PrivateUse1, g_current_device));
  if (dev.index() < 0) dev = c10::Device(DeviceType::PrivateUse1, g_current_device);
  check_device_index(dev.index());
  c10::DeviceGuard guard(dev);
  return at::detail::empty_generic(size, &allocator(),
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   dtype.value_or(c10::get_default_dtype_as_scalartype()), fmt);
}

at::Tensor tpu_empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                             std::optional<c10::ScalarType> dtype, std::optional<c10::Layout>,
                             std::optional<c10::Device> device, std::optional<bool>) {
  c10::Device dev = device.value_or(c10::Device(DeviceType::PrivateUse1, g_current_device));
  if (dev.index() < 0) dev = c10::Device(DeviceType::PrivateUse1, g_current_device);
  check_device_index(dev.index());
  c10::DeviceGuard guard(dev);
  return at::detail::empty_strided_generic(
      size, stride, &allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      dtype.value_or(c10::get_default_dtype_as_scalartype()));
}

// Resizes |storage| to |nbytes| (untyped_storage().resize_(), FSDP's free and re-allocate; a
// tensor or set_ that needs more room), keeping the contents that fit: a device copy of them into
// the new buffer. Growing leaves the new bytes undefined, as on CUDA.
void resize_storage(const c10::Storage& storage, size_t nbytes) {
  tp_storage_t* old = static_cast<tp_storage_t*>(storage.data_ptr().get_context());
  c10::DeviceGuard guard(storage.device());
  c10::DataPtr fresh = allocator().allocate(nbytes);
  // The buffer is read under the executor lock: a collective may still be writing it (exec.h).
  bool has_contents = false;
  tp_dtype_t held = TP_DTYPE_F32;
  if (old) {
    tp_exec_lock();
    has_contents = tp_storage_buffer(old) && tp_storage_buffer_numel(old) > 0;
    if (has_contents) held = tp_storage_buffer_dtype(old);
    tp_exec_unlock();
  }
  if (has_contents && fresh.get_context()) {
    tp_view_t src{};
    src.storage = old;
    src.dtype = held;
    src.ndim = 1;
    src.sizes[0] = std::min<int64_t>(tp_storage_elems(old, src.dtype),
                                     static_cast<int64_t>(nbytes / tp_dtype_size(src.dtype)));
    src.strides[0] = 1;
    tp_view_t dst = src;
    dst.storage = static_cast<tp_storage_t*>(fresh.get_context());
    if (src.sizes[0] > 0) check(tp_eager_copy(&dst, &src));
  }
  storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(fresh));
  storage.unsafeGetStorageImpl()->set_nbytes(nbytes);
}

const at::Tensor& tpu_resize_(const at::Tensor& self, c10::IntArrayRef size,
                              std::optional<c10::MemoryFormat> fmt) {
  int64_t numel = c10::multiply_integers(size);
  size_t need = numel == 0 ? 0 : static_cast<size_t>(self.storage_offset() + numel) * self.itemsize();
  if (need > self.storage().nbytes()) resize_storage(self.storage(), need);
  self.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  if (fmt) self.unsafeGetTensorImpl()->empty_tensor_restride(*fmt);
  return self;
}

at::Tensor& tpu_set_storage(at::Tensor& self, c10::Storage source, int64_t offset,
                            c10::IntArrayRef size, c10::IntArrayRef stride) {
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(source));
  self.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride, offset);
  int64_t extent = 1;
  bool empty = false;
  for (size_t i = 0; i < size.size(); i++) {
    if (size[i] == 0) empty = true;
    extent += (size[i] - 1) * stride[i];
  }
  size_t need = empty ? 0 : static_cast<size_t>(offset + extent) * self.itemsize();
  if (need > self.storage().nbytes()) resize_storage(self.storage(), need);
  return self;
}

at::Tensor& tpu_set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.itemsize());
  return tpu_set_storage(self, std::move(source), 0, {n}, {1});
}

at::Tensor& tpu_set_tensor(at::Tensor& self, const at::Tensor& src) {
  if (self.is_same(src)) return self;
  return tpu_set_storage(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

at::Tensor& tpu_set_empty(at::Tensor& self) {
  c10::Storage s(c10::Storage::use_byte_size_t(), 0, &allocator(), true);
  return tpu_set_storage(self, std::move(s), 0, {0}, {1});
}

at::Tensor tpu_as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                          std::optional<int64_t> offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, offset);
}

at::Tensor tpu_view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor tpu_reshape_alias(const at::Tensor& self, c10::IntArrayRef size,
                             c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

at::Tensor tpu_unfold(const at::Tensor& self, int64_t dim, int64_t size, int64_t step) {
  return at::native::unfold(self, dim, size, step);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", tpu_empty);
  m.impl("empty_strided", tpu_empty_strided);
  m.impl("copy_", tpu_copy_);
  m.impl("_copy_from", tpu_copy_from);
  m.impl("_copy_from_and_resize", tpu_copy_from_and_resize);
  m.impl("_local_scalar_dense", tpu_local_scalar_dense);
  // tpu tensors are plain strided TensorImpls, like CPU ones: `param.data = t` and
  // Module.to("tpu") may swap them in place, which keeps tied parameters tied (as on CUDA).
  m.impl("_has_compatible_shallow_copy_type", [](const at::Tensor& self, const at::Tensor& from) {
    return self.layout() == c10::kStrided && from.layout() == c10::kStrided;
  });
  m.impl("resize_", tpu_resize_);
  m.impl("set_.source_Storage_storage_offset", tpu_set_storage);
  m.impl("set_.source_Storage", tpu_set_source_storage);
  m.impl("set_.source_Tensor", tpu_set_tensor);
  m.impl("set_", tpu_set_empty);
  m.impl("as_strided", tpu_as_strided);
  m.impl("view", tpu_view);
  m.impl("_reshape_alias", tpu_reshape_alias);
  m.impl("unfold", tpu_unfold);
  // A complex tensor's storage holds its interleaved parts, so its real views are PyTorch's own
  // metadata views of the same storage.
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
}

}  // namespace tp_glue
