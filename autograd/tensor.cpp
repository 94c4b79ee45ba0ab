#include "autograd/tensor.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "autograd/kernels.h"
#include "autograd/random.h"
#include "autograd/tape.h"

namespace tapegrad {

// ---- storage memory: small buffers from malloc, large ones through a cache ----
//
// Training asks for the same buffer sizes every step: step N+1 allocates exactly what step N freed. So a
// buffer of at least kCachedBytes is not returned to the system when its storage dies but kept in a free
// list for its size (rounded up to whole pages), and the next request of that size takes it back: no
// fresh pages to fault in and zero, and no heap fragmentation (glibc's heap, with large short-lived
// buffers among small long-lived objects, held about twice the live bytes). Large buffers are their own
// mappings, so a buffer that leaves the cache goes straight back to the system.
//
// Bound: idle bytes stay at most twice the most bytes ever live at once (a step's buffers need about
// 1.2 times that when sizes repeat); beyond it the least recently freed buffers are unmapped, so buffers
// of shapes no longer used (another sequence length, say) do not accumulate. release_cached_storage()
// drops every idle buffer.
//
// Storages die on whatever thread drops the last reference, so the lists sit behind a mutex: one lock
// per large allocation, which is noise next to writing the buffer.
//
// Sanitizer builds (and TAPEGRAD_STORAGE_CACHE=0) bypass the cache, so that AddressSanitizer sees every
// use after free.
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kCachedBytes = kPage;  // smaller buffers come from malloc, which is fast at small sizes

bool cache_enabled() {
#if defined(__SANITIZE_ADDRESS__)
  return false;
#else
  static const bool enabled = [] {
    const char* env = std::getenv("TAPEGRAD_STORAGE_CACHE");
    return !(env && std::strcmp(env, "0") == 0);
  }();
  return enabled;
#endif
}

class StorageCache {
 public:
  /// A page-aligned buffer of `bytes` (a multiple of kPage): an idle one of that size, else a new mapping.
  void* allocate(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_ += bytes;
      peak_live_ = std::max(peak_live_, live_);
      auto it = idle_.find(bytes);
      if (it != idle_.end() && !it->second.empty()) {
        void* p = it->second.back().data;
        it->second.pop_back();
        idle_bytes_ -= bytes;
        return p;
      }
    }
    void* p = map(bytes);
    if (!p) {  // out of address space or memory: give back what sits idle, then try once more
      release_idle();
      p = map(bytes);
    }
    if (!p) {
      std::lock_guard<std::mutex> lock(mutex_);
      live_ -= bytes;
      throw Error(cat("out of memory allocating ", bytes, " bytes"));
    }
    return p;
  }

  /// Takes back a buffer from allocate(bytes), keeping it for reuse within the bound.
  void release(void* p, size_t bytes) {
    std::vector<Idle> evicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_ -= bytes;
      idle_[bytes].push_back({p, ++clock_});
      idle_bytes_ += bytes;
      while (idle_bytes_ > 2 * peak_live_) evicted.push_back(take_oldest());
    }
    for (const Idle& idle : evicted) ::munmap(idle.data, idle.bytes);
  }

  void release_idle() {
    std::vector<Idle> evicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (idle_bytes_ > 0) evicted.push_back(take_oldest());
    }
    for (const Idle& idle : evicted) ::munmap(idle.data, idle.bytes);
  }

 private:
  struct Idle {
    void* data;
    uint64_t freed_at;  // clock_ when it was released: smaller is older
    size_t bytes = 0;
  };

  static void* map(size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }

  /// Removes the least recently freed idle buffer (idle_bytes_ > 0; mutex held). Each list is in release
  /// order, so the oldest is the front of one of them; there are only as many lists as buffer sizes.
  Idle take_oldest() {
    auto oldest = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it)
      if (!it->second.empty() && (oldest == idle_.end() || it->second.front().freed_at < oldest->second.front().freed_at))
        oldest = it;
    Idle idle = oldest->second.front();
    idle.bytes = oldest->first;
    oldest->second.erase(oldest->second.begin());
    idle_bytes_ -= idle.bytes;
    return idle;
  }

  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<Idle>> idle_;  // by size; each in release order (back = newest)
  size_t live_ = 0, peak_live_ = 0, idle_bytes_ = 0;
  uint64_t clock_ = 0;
};

/// Never destroyed: storages held by static objects may die after every other static.
StorageCache& storage_cache() {
  static StorageCache* cache = new StorageCache;
  return *cache;
}

/// The size a buffer of `bytes` is allocated at, and whether it goes through the cache.
size_t cached_size(size_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }
bool use_cache(size_t bytes) { return bytes >= kCachedBytes && cache_enabled(); }

}  // namespace

Storage::Storage(size_t nbytes) : bytes(nbytes) {
  if (use_cache(nbytes)) {
    data = storage_cache().allocate(cached_size(nbytes));  // page-aligned
    return;
  }
  // 64-byte alignment suits AVX-512 loads; aligned_alloc wants a multiple of the alignment.
  const size_t rounded = (nbytes + 63) / 64 * 64;
  data = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  if (rounded && !data) throw Error(cat("out of memory allocating ", nbytes, " bytes"));
}

Storage::~Storage() {
  if (use_cache(bytes))
    storage_cache().release(data, cached_size(bytes));
  else
    std::free(data);
}

void release_cached_storage() {
  if (cache_enabled()) storage_cache().release_idle();
}

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

void* base_of(const Tensor& t) {
  return static_cast<char*>(t.storage()->data) + t.offset() * static_cast<int64_t>(itemsize(t.dtype()));
}

/// True when the two tensors' storages are one (a copy between them must go element by element in
/// order, as the general path does, to keep its meaning).
bool overlaps(const Tensor& a, const Tensor& b) { return a.storage() == b.storage(); }

/// dst = src element by element for one dtype, U an unsigned integer of its size (the bits are copied).
template <class U>
void copy_strided(const Tensor& dst, const Tensor& src) {
  U* to = reinterpret_cast<U*>(base_of(dst));
  const U* from = reinterpret_cast<const U*>(base_of(src));
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
  return read_element(base_of(*this), dtype(), 0);
}

double Tensor::at(std::initializer_list<int64_t> index) const {
  if (static_cast<int>(index.size()) != dim())
    throw ShapeError(cat("at: ", index.size(), " indices for a tensor of shape ", shape()));
  int64_t offset = 0, d = 0;
  for (int64_t i : index) {
    if (i < 0 || i >= shape()[d]) throw ShapeError(cat("at: index ", i, " out of range for dim ", d, " of ", shape()));
    offset += i * strides()[d++];
  }
  return read_element(base_of(*this), dtype(), offset);
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> values;
  values.reserve(numel());
  const void* base = base_of(*this);
  for_each_offset(*this, [&](int64_t off) { values.push_back(read_element(base, dtype(), off)); });
  return values;
}

std::vector<int64_t> Tensor::to_int_vector() const {
  std::vector<int64_t> values;
  for (double v : to_vector()) values.push_back(static_cast<int64_t>(v));
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
  if (!impl().autograd) impl().autograd = std::make_shared<AutogradMeta>();
  return *this;
}

bool Tensor::is_leaf() const { return !requires_grad() || impl_->autograd->node < 0; }

Tensor Tensor::grad() const { return requires_grad() ? impl().autograd->grad : Tensor(); }

void Tensor::zero_grad() const {
  if (requires_grad()) impl().autograd->grad = Tensor();
}

Tensor Tensor::detach() const {
  auto view = std::make_shared<TensorImpl>(impl());
  view->autograd.reset();
  return Tensor(std::move(view));
}

Tensor& Tensor::fill_(double value) {
  check_in_place(*this, "fill_");
  void* base = base_of(*this);
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
    if (numel()) std::memmove(base_of(*this), base_of(source), numel() * itemsize(dtype()));
  } else if (source.dtype() == dtype() && !overlaps(*this, source)) {
    // Same dtype, strided (a transposed view made contiguous, say): copy the bits row by row.
    switch (itemsize(dtype())) {
      case 1: copy_strided<uint8_t>(*this, source); break;
      case 4: copy_strided<uint32_t>(*this, source); break;
      case 8: copy_strided<uint64_t>(*this, source); break;
    }
  } else {
    const void* from = base_of(source);
    void* to = base_of(*this);
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
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(shape.numel() * itemsize(dtype));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  if (t.numel()) std::memset(t.storage()->data, 0, t.numel() * itemsize(dtype));
  return t;
}

Tensor full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  void* base = t.storage()->data;
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
  for (int64_t i = 0; i < n; ++i) write_element(t.storage()->data, dtype, i, start + i * step);
  return t;
}

Tensor arange(int64_t end, DType dtype) { return arange(0, static_cast<double>(end), 1, dtype); }

Tensor tensor(const std::vector<double>& values, const Shape& shape, DType dtype) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw ShapeError(cat("tensor: ", values.size(), " values do not fill shape ", shape, " (", shape.numel(), ")"));
  Tensor t = empty(shape, dtype);
  for (size_t i = 0; i < values.size(); ++i) write_element(t.storage()->data, dtype, i, values[i]);
  return t;
}

Tensor tensor(const std::vector<double>& values, DType dtype) {
  return tensor(values, Shape{static_cast<int64_t>(values.size())}, dtype);
}

Tensor ids(const std::vector<int64_t>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw ShapeError(cat("ids: ", values.size(), " values do not fill shape ", shape));
  Tensor t = empty(shape, DType::int64);
  if (!values.empty()) std::memcpy(t.storage()->data, values.data(), values.size() * sizeof(int64_t));
  return t;
}

Tensor mask(const std::vector<int>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw ShapeError(cat("mask: ", values.size(), " values do not fill shape ", shape));
  Tensor t = empty(shape, DType::boolean);
  for (size_t i = 0; i < values.size(); ++i) static_cast<uint8_t*>(t.storage()->data)[i] = values[i] != 0;
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

void check_same_float(const Tensor& a, const Tensor& b, const char* op) {
  if (!is_floating(a.dtype()) || a.dtype() != b.dtype())
    throw DTypeError(cat(op, ": operands ", a.shape(), " ", dtype_name(a.dtype()), " and ", b.shape(), " ",
                         dtype_name(b.dtype()), " must share one float dtype (convert one with .to())"));
}

void zero_fill(Tensor& t) {
  if (t.is_contiguous()) {
    if (t.numel()) std::memset(base_of(t), 0, t.numel() * itemsize(t.dtype()));
    return;
  }
  void* base = base_of(t);
  for_each_offset(t, [&](int64_t off) { write_element(base, t.dtype(), off, 0); });
}

namespace {

/// dst (+)= s · src for one float type (`kScaled` false: s is 1 and not applied), over `shape` with the
/// operands read through these (broadcast) strides.
template <class T, bool kAssign, bool kScaled>
void write_rows(T* pd, const T* ps, T s, const Shape& shape, const Shape& dst_strides, const Shape& src_strides) {
  auto value = [s](T v) {
    if constexpr (kScaled) return s * v;
    else return v;
  };
  for_each_row<2>(shape, {dst_strides, src_strides}, [&](auto off, int64_t n, auto step) {
    T* d = pd + off[0];
    const T* x = ps + off[1];
    if (step[0] == 1 && step[1] == 1) {
      for (int64_t k = 0; k < n; ++k) {
        if constexpr (kAssign) d[k] = value(x[k]);
        else d[k] += value(x[k]);
      }
    } else {
      for (int64_t k = 0; k < n; ++k) {
        if constexpr (kAssign) d[k * step[0]] = value(x[k * step[1]]);
        else d[k * step[0]] += value(x[k * step[1]]);
      }
    }
  });
}

template <class T, bool kScaled>
void write_into_typed(Tensor& dst, bool assign, const Tensor& src, T s, const Shape& shape) {
  T* pd = dst.data<T>();
  const T* ps = src.data<T>();
  if (!assign && dst.is_contiguous() && src.is_contiguous() && src.shape() == shape && dst.numel() > 0 &&
      detail::is_row_of(dst.shape(), shape)) {
    // dst sums src's rows (a bias gradient): d += each row in turn, no per-row index arithmetic
    const int64_t n = dst.numel(), rows = src.numel() / n;
    for (int64_t r = 0; r < rows; ++r) {
      const T* x = ps + r * n;
      for (int64_t k = 0; k < n; ++k) {
        if constexpr (kScaled) pd[k] += s * x[k];
        else pd[k] += x[k];
      }
    }
    return;
  }
  const Shape dst_strides = broadcast_strides(dst, shape), src_strides = broadcast_strides(src, shape);
  if (assign) write_rows<T, true, kScaled>(pd, ps, s, shape, dst_strides, src_strides);
  else write_rows<T, false, kScaled>(pd, ps, s, shape, dst_strides, src_strides);
}

}  // namespace

void write_into(Tensor& dst, bool assign, const Tensor& src, double scale) {
  const Shape shape = broadcast_shapes(dst.shape(), src.shape(), "accumulate");
  if (assign && !(shape == dst.shape())) {  // dst sums over broadcast dims: from zero
    zero_fill(dst);
    assign = false;
  }
  if (assign && scale == 1 && src.dtype() == dst.dtype() && src.shape() == dst.shape() && src.is_contiguous() &&
      dst.is_contiguous() && is_floating(dst.dtype())) {
    if (dst.numel()) std::memcpy(base_of(dst), base_of(src), dst.numel() * itemsize(dst.dtype()));
  } else {
    dispatch_float(dst.dtype(), "accumulate", [&](auto tag) {
      using T = decltype(tag);
      if (scale == 1) write_into_typed<T, false>(dst, assign, src, T(1), shape);
      else write_into_typed<T, true>(dst, assign, src, static_cast<T>(scale), shape);
    });
  }
  ++dst.storage()->version;
}

void accumulate_into(Tensor& dst, const Tensor& src, double scale) { write_into(dst, false, src, scale); }

}  // namespace tapegrad
