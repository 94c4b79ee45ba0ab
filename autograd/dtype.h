#pragma once
// The element types a tensor can hold: float32 for training, float64 for gradient checks,
// int64 for token ids and targets, bool for masks (stored as one byte).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "autograd/error.h"

namespace tapegrad {

enum class DType : uint8_t { float32, float64, int64, boolean };

constexpr size_t itemsize(DType dtype) {
  switch (dtype) {
    case DType::float32: return 4;
    case DType::float64: return 8;
    case DType::int64: return 8;
    case DType::boolean: return 1;
  }
  return 0;
}

constexpr const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::int64: return "int64";
    case DType::boolean: return "bool";
  }
  return "?";
}

constexpr bool is_floating(DType dtype) { return dtype == DType::float32 || dtype == DType::float64; }

template <class T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::float32; }
template <> constexpr DType dtype_of<double>() { return DType::float64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::int64; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }

/// Whether float32, in which models train and run, holds a real as itself to within rounding: 0, or a finite
/// magnitude between its smallest normal (about 1.2e-38) and its largest value (about 3.4e38). A larger one is
/// infinite in float32; a smaller nonzero one a denormal or 0, so an eps of 1e-50 would add nothing.
inline bool float32_holds(double v) {
  const double magnitude = std::fabs(v);
  return v == 0 || (magnitude >= std::numeric_limits<float>::min() && magnitude <= std::numeric_limits<float>::max());
}

/// Why float32 does not hold v (for a value float32_holds refuses): "is infinite in float32 ...".
inline const char* float32_refusal(double v) {
  return std::fabs(v) > 1 ? "is infinite in float32, in which models compute (its largest value is about 3.4e38)"
                          : "is 0 or a denormal in float32, in which models compute (its smallest normal value is "
                            "about 1.2e-38)";
}

/// Calls fn(T{}) with T = float or double for a floating dtype; any other dtype is a DTypeError naming op.
template <class Fn>
decltype(auto) dispatch_float(DType dtype, const char* op, Fn&& fn) {
  if (dtype == DType::float32) return fn(float{});
  if (dtype == DType::float64) return fn(double{});
  throw DTypeError(cat(op, ": expected a float32 or float64 tensor, got ", dtype_name(dtype)));
}

}  // namespace tapegrad
