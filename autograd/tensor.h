#pragma once
// Tensor: a handle to a strided view of shared storage, plus the autograd state the tape needs.
// Copies of a Tensor share everything (like PyTorch's); views share storage but not shape/strides.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/error.h"
#include "autograd/shape.h"

namespace tapegrad {

class Generator;
class Tensor;
struct TensorImpl;

/// Raw bytes shared by a tensor and its views. `version` counts in-place writes so that backward can
/// tell when a tensor it saved was modified after it was saved. Buffers of a page or more are recycled
/// through a cache, since training allocates the same sizes every step (see tensor.cpp).
struct Storage {
  explicit Storage(size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data = nullptr;
  size_t bytes = 0;
  size_t capacity = 0;  // bytes reserved at data: at least `bytes` (the storage cache rounds up)
  uint64_t version = 0;
};

struct AutogradMeta;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::float32;
  std::shared_ptr<AutogradMeta> autograd;  // null unless it requires grad
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  int dim() const { return impl().shape.rank(); }
  /// Size of one dim; negative dims count from the end.
  int64_t size(int64_t dim) const;
  int64_t numel() const { return impl().shape.numel(); }
  DType dtype() const { return impl().dtype; }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }

  /// Address of the first element (offset applied), untyped: for copies of raw bytes and reads by dtype.
  /// The one place that turns storage and offset into an address; data<T>() is its typed form.
  void* data_ptr() const {
    return static_cast<char*>(impl().storage->data) + impl().offset * static_cast<int64_t>(itemsize(dtype()));
  }
  /// Typed pointer to the first element (offset applied); throws DTypeError when T is not the dtype.
  template <class T>
  T* data() const {
    if (dtype_of<T>() != dtype())
      throw DTypeError(cat("data<", dtype_name(dtype_of<T>()), ">: tensor is ", dtype_name(dtype())));
    return static_cast<T*>(data_ptr());
  }
  /// The value of a one-element tensor, as double.
  double item() const;
  /// Element at a full index, as double (for tests and printing; not for hot loops).
  double at(std::initializer_list<int64_t> index) const;
  /// All elements in row-major order, as double.
  std::vector<double> to_vector() const;
  std::vector<int64_t> to_int_vector() const;

  // ---- autograd ----
  bool requires_grad() const { return impl_ && impl_->autograd != nullptr; }
  /// Marks a leaf as requiring grad (its .grad accumulates over backward calls); only floating tensors.
  Tensor& requires_grad_(bool on = true);
  /// The accumulated gradient of a leaf; undefined until a backward reached it.
  Tensor grad() const;
  /// Drops the accumulated gradient.
  void zero_grad() const;
  /// A tensor sharing this one's data that the tape does not track.
  Tensor detach() const;
  /// True when no op on the tape produced it (a leaf, or any tensor that needs no grad).
  bool is_leaf() const;
  /// Computes gradients of this tensor w.r.t. every leaf that requires grad (see tape.h: backward).
  void backward() const;
  void backward(const Tensor& gradient) const;

  // ---- copies and conversions (recorded on the tape when differentiable) ----
  Tensor contiguous() const;  // itself when already contiguous
  Tensor clone() const;       // always a fresh contiguous copy
  Tensor to(DType dtype) const;

  // ---- in-place writes: refused on tensors that require grad while grad mode is on ----
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& source);  // same shape, any dtype of the same kind

  /// PyTorch-like text: tensor([[0.1385, 0.2379], ...]).
  std::string str() const;

  TensorImpl& impl() const {
    if (!impl_) throw Error("use of an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  /// True when both handles refer to the same tensor object.
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& out, const Tensor& t);

/// Autograd state of a tensor that requires grad. Tape entries point at it (not at the tensor's data),
/// so recording an op keeps no input's data alive unless its backward saved it.
struct AutogradMeta {
  int64_t node = -1;             // index of the entry that produced it on its thread's tape; -1: a leaf
  uint64_t tape_generation = 0;  // the tape generation `node` refers to
  Tensor grad;                   // leaves only: the accumulated .grad
};

/// Returns the idle buffers that the storage cache keeps for reuse to the system (the cache holds at most
/// twice the most bytes ever live at once).
void release_cached_storage();
/// How many buffers the storage cache has taken from the system (mmap) so far: steady-state training
/// steps, which reuse the buffers of the step before, take none.
uint64_t storage_mappings();
/// Bytes of all tensor storage alive now, and the most alive at once since reset_peak_tensor_bytes():
/// what activations, gradients and parameters take, without the storage cache's idle buffers. Tests of
/// memory growth (flash attention's, linear in T) measure with it, in every build.
struct TensorBytes {
  uint64_t live = 0, peak = 0;
};
TensorBytes tensor_bytes();
/// Starts a new peak from the bytes alive now.
void reset_peak_tensor_bytes();

// ---- creation ----
/// Uninitialised contiguous tensor.
Tensor empty(const Shape& shape, DType dtype = DType::float32);
Tensor zeros(const Shape& shape, DType dtype = DType::float32);
Tensor ones(const Shape& shape, DType dtype = DType::float32);
Tensor full(const Shape& shape, double value, DType dtype = DType::float32);
Tensor zeros_like(const Tensor& t);
/// [start, start + step, ...) up to end (exclusive), as in torch.arange.
Tensor arange(double start, double end, double step = 1, DType dtype = DType::float32);
Tensor arange(int64_t end, DType dtype = DType::int64);
/// A tensor of this shape holding `values` in row-major order (sizes must agree).
Tensor tensor(const std::vector<double>& values, const Shape& shape, DType dtype = DType::float32);
/// A 1-D tensor of the values.
Tensor tensor(const std::vector<double>& values, DType dtype = DType::float32);
/// An int64 tensor of ids (token ids, targets).
Tensor ids(const std::vector<int64_t>& values, const Shape& shape);
/// A bool tensor (masks); nonzero values are true.
Tensor mask(const std::vector<int>& values, const Shape& shape);
/// Uniform in [low, high), from the explicit generator (identical on every platform).
Tensor uniform(const Shape& shape, Generator& gen, double low = 0, double high = 1, DType dtype = DType::float32);
/// Uniform in [0, 1), like torch.rand.
Tensor rand(const Shape& shape, Generator& gen, DType dtype = DType::float32);
/// Standard normal, like torch.randn.
Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::float32);

/// Largest |a - b| over all elements (shapes must match); for tests.
double max_abs_diff(const Tensor& a, const Tensor& b);
/// True when every |a - b| <= atol + rtol * |b| (shapes must match).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

}  // namespace tapegrad
