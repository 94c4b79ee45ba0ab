#include "autograd/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "autograd/elementwise_map.h"
#include "autograd/pool.h"
#include "autograd/random.h"
#include "autograd/tape.h"

namespace tapegrad {

namespace {

double read_element(const void* base, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::float32: return static_cast<const float*>(base)[index];
    case DType::float64: return static_cast<const double*>(base)[index];
    case DType::int64: return static_cast<double>(static_cast<const int64_t*>(base)[index]);
    case DType::boolean: return static_cast<const uint8_t*>(base)[index] ? 1.0 : 0.0;
  }
  return 0;
}

void write_element(void* base, DType dtype, int64_t index, double value) {
  switch (dtype) {
    case DType::float32: static_cast<float*>(base)[index] = static_cast<float>(value); break;
    case DType::float64: static_cast<double*>(base)[index] = value; break;
    case DType::int64: static_cast<int64_t*>(base)[index] = static_cast<int64_t>(value); break;
    case DType::boolean: static_cast<uint8_t*>(base)[index] = value != 0; break;
  }
}

/// Element offsets of every element in row-major order.
template <class Fn>
void for_each_offset(const Tensor& t, Fn fn) {
  for_each_row<1>(t.shape(), {t.strides()}, [&](auto off, int64_t n, auto step) {
    for (int64_t k = 0; k < n; ++k) fn(off[0] + k * step[0]);
  });
}

void check_in_place(const Tensor& t, const char* op) {
  if (t.requires_grad() && grad_enabled())
    throw AutogradError(cat(op, ": in-place write to a tensor that requires grad (shape ", t.shape(),
                            "); do it under NoGradGuard, or on a detach()ed copy"));
}

/// True when the two tensors' storages are one (a copy between them must go element by element in
/// order, as the general path does, to keep its meaning).
bool overlaps(const Tensor& a, const Tensor& b) { return a.storage() == b.storage(); }

/// dst = src element by element for one dtype, U an unsigned integer of its size (the bits are copied).
template <class U>
void copy_strided(const Tensor& dst, const Tensor& src) {
  U* to = reinterpret_cast<U*>(dst.data_ptr());
  const U* from = reinterpret_cast<const U*>(src.data_ptr());
  for_each_row<2>(dst.shape(), {dst.strides(), src.strides()}, [&](auto off, int64_t n, auto step) {
    U* o = to + off[0];
    const U* i = from + off[1];
    if (step[0] == 1 && step[1] == 1)
      std::memcpy(o, i, n * sizeof(U));
    else if (step[0] == 1)
      for (int64_t k = 0; k < n; ++k) o[k] = i[k * step[1]];
    else
      for (int64_t k = 0; k < n; ++k) o[k * step[0]] = i[k * step[1]];
  });
}

}  // namespace

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size", shape())]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (shape()[i] != 1 && strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

double Tensor::item() const {
  if (numel() != 1) throw ShapeError(cat("item: tensor of shape ", shape(), " has ", numel(), " elements, not 1"));
  return read_element(data_ptr(), dtype(), 0);
}

double Tensor::at(std::initializer_list<int64_t> index) const {
  if (static_cast<int>(index.size()) != dim())
    throw ShapeError(cat("at: ", index.size(), " indices for a tensor of shape ", shape()));
  int64_t offset = 0, d = 0;
  for (int64_t i : index) {
    if (i < 0 || i >= shape()[d]) throw ShapeError(cat("at: index ", i, " out of range for dim ", d, " of ", shape()));
    offset += i * strides()[d++];
  }
  return read_element(data_ptr(), dtype(), offset);
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> values;
  values.reserve(numel());
  const void* base = data_ptr();
  for_each_offset(*this, [&](int64_t off) { values.push_back(read_element(base, dtype(), off)); });
  return values;
}

std::vector<int64_t> Tensor::to_int_vector() const {
  std::vector<int64_t> values;
  values.reserve(numel());
  const void* base = data_ptr();
  for_each_offset(*this, [&](int64_t off) { values.push_back(static_cast<int64_t>(read_element(base, dtype(), off))); });
  return values;
}

Tensor& Tensor::requires_grad_(bool on) {
  if (!on) {
    if (!is_leaf()) throw AutogradError("requires_grad_(false): only leaves can stop requiring grad; use detach()");
    impl().autograd.reset();
    return *this;
  }
  if (!is_floating(dtype()))
    throw DTypeError(cat("requires_grad_: only float tensors can require grad, not ", dtype_name(dtype())));
  if (!impl().autograd) impl().autograd = make_pooled<AutogradMeta>();
  return *this;
}

bool Tensor::is_leaf() const { return !requires_grad() || impl_->autograd->node < 0; }

Tensor Tensor::grad() const { return requires_grad() ? impl().autograd->grad : Tensor(); }

void Tensor::zero_grad() const {
  if (requires_grad()) impl().autograd->grad = Tensor();
}

Tensor Tensor::detach() const {
  auto view = make_pooled<TensorImpl>(impl());
  view->autograd.reset();
  return Tensor(std::move(view));
}

Tensor& Tensor::fill_(double value) {
  check_in_place(*this, "fill_");
  void* base = data_ptr();
  for_each_offset(*this, [&](int64_t off) { write_element(base, dtype(), off, value); });
  ++storage()->version;
  return *this;
}

Tensor& Tensor::copy_(const Tensor& source) {
  check_in_place(*this, "copy_");
  if (!(source.shape() == shape()))
    throw ShapeError(cat("copy_: source shape ", source.shape(), " differs from destination shape ", shape()));
  if (is_floating(source.dtype()) != is_floating(dtype()))
    throw DTypeError(cat("copy_: cannot copy ", dtype_name(source.dtype()), " into ", dtype_name(dtype())));
  if (source.dtype() == dtype() && is_contiguous() && source.is_contiguous()) {
    if (numel()) std::memmove(data_ptr(), source.data_ptr(), numel() * itemsize(dtype()));
  } else if (source.dtype() == dtype() && !overlaps(*this, source)) {
    // Same dtype, strided (a transposed view made contiguous, say): copy the bits row by row.
    switch (itemsize(dtype())) {
      case 1: copy_strided<uint8_t>(*this, source); break;
      case 4: copy_strided<uint32_t>(*this, source); break;
      case 8: copy_strided<uint64_t>(*this, source); break;
    }
  } else {
    const void* from = source.data_ptr();
    void* to = data_ptr();
    for_each_row<2>(shape(), {strides(), source.strides()}, [&](auto off, int64_t n, auto step) {
      for (int64_t k = 0; k < n; ++k)
        write_element(to, dtype(), off[0] + k * step[0], read_element(from, source.dtype(), off[1] + k * step[1]));
    });
  }
  ++storage()->version;
  return *this;
}

// ---- creation ----

Tensor empty(const Shape& shape, DType dtype) {
  for (int64_t d : shape)
    if (d < 0) throw ShapeError(cat("empty: negative dim in shape ", shape));
  auto impl = make_pooled<TensorImpl>();
  impl->storage = make_pooled<Storage>(shape.numel() * itemsize(dtype));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  if (t.numel()) std::memset(t.data_ptr(), 0, t.numel() * itemsize(dtype));
  return t;
}

Tensor full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  void* base = t.data_ptr();
  for (int64_t i = 0; i < t.numel(); ++i) write_element(base, dtype, i, value);
  return t;
}

Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1, dtype); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }

Tensor arange(double start, double end, double step, DType dtype) {
  if (step == 0) throw ValueError("arange: step must be nonzero");
  const double count = std::ceil((end - start) / step);
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  Tensor t = empty({n}, dtype);
  void* base = t.data_ptr();
  for (int64_t i = 0; i < n; ++i) write_element(base, dtype, i, start + i * step);
  return t;
}

Tensor arange(int64_t end, DType dtype) { return arange(0, static_cast<double>(end), 1, dtype); }

Tensor tensor(const std::vector<double>& values, const Shape& shape, DType dtype) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw ShapeError(cat("tensor: ", values.size(), " values do not fill shape ", shape, " (", shape.numel(), ")"));
  Tensor t = empty(shape, dtype);
  void* base = t.data_ptr();
  for (size_t i = 0; i < values.size(); ++i) write_element(base, dtype, i, values[i]);
  return t;
}

Tensor tensor(const std::vector<double>& values, DType dtype) {
  return tensor(values, Shape{static_cast<int64_t>(values.size())}, dtype);
}

Tensor ids(const std::vector<int64_t>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw ShapeError(cat("ids: ", values.size(), " values do not fill shape ", shape));
  Tensor t = empty(shape, DType::int64);
  if (!values.empty()) std::memcpy(t.data_ptr(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

Tensor mask(const std::vector<int>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw ShapeError(cat("mask: ", values.size(), " values do not fill shape ", shape));
  Tensor t = empty(shape, DType::boolean);
  bool* base = t.data<bool>();
  for (size_t i = 0; i < values.size(); ++i) base[i] = values[i] != 0;
  return t;
}

Tensor uniform(const Shape& shape, Generator& gen, double low, double high, DType dtype) {
  Tensor t = empty(shape, dtype);
  dispatch_float(dtype, "uniform", [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double u = std::is_same_v<T, float> ? gen.uniform_float() : gen.uniform();
      p[i] = static_cast<T>(low + (high - low) * u);
    }
  });
  return t;
}

Tensor rand(const Shape& shape, Generator& gen, DType dtype) { return uniform(shape, gen, 0, 1, dtype); }

Tensor randn(const Shape& shape, Generator& gen, DType dtype) {
  Tensor t = empty(shape, dtype);
  dispatch_float(dtype, "randn", [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(gen.normal());
  });
  return t;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape())) throw ShapeError(cat("max_abs_diff: shapes ", a.shape(), " and ", b.shape(), " differ"));
  const auto x = a.to_vector(), y = b.to_vector();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = std::fabs(x[i] - y[i]);
    if (d > worst || std::isnan(d)) worst = d;
  }
  return worst;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (!(a.shape() == b.shape())) return false;
  const auto x = a.to_vector(), y = b.to_vector();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::fabs(x[i] - y[i]) <= atol + rtol * std::fabs(y[i]))) return false;
  return true;
}

}  // namespace tapegrad
