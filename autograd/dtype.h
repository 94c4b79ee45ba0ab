#pragma once
// The element types a tensor can hold: float32 for training, float64 for gradient checks,
// int64 for token ids and targets, bool for masks (stored as one byte).
#include <cstddef>
#include <cstdint>

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

/// Calls fn(T{}) with T = float or double for a floating dtype; any other dtype is a DTypeError naming op.
template <class Fn>
decltype(auto) dispatch_float(DType dtype, const char* op, Fn&& fn) {
  if (dtype == DType::float32) return fn(float{});
  if (dtype == DType::float64) return fn(double{});
  throw DTypeError(cat(op, ": expected a float32 or float64 tensor, got ", dtype_name(dtype)));
}

}  // namespace tapegrad
