#pragma once
// Shape: the dims of a tensor, held inline (no heap allocation) so that making a tensor or a tape entry
// stays cheap. Strides use the same type.
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "autograd/error.h"

namespace tapegrad {

inline constexpr int kMaxRank = 12;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    for (int64_t d : dims) push_back(d);
  }
  explicit Shape(const std::vector<int64_t>& dims) {
    for (int64_t d : dims) push_back(d);
  }

  int rank() const { return rank_; }
  bool empty() const { return rank_ == 0; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  int64_t back() const { return dims_[rank_ - 1]; }
  const int64_t* begin() const { return dims_; }
  const int64_t* end() const { return dims_ + rank_; }

  void push_back(int64_t d) {
    if (rank_ == kMaxRank) throw ShapeError(cat("tensors have at most ", kMaxRank, " dims"));
    dims_[rank_++] = d;
  }
  void insert(int at, int64_t d) {
    push_back(0);
    for (int i = rank_ - 1; i > at; --i) dims_[i] = dims_[i - 1];
    dims_[at] = d;
  }
  void erase(int at) {
    for (int i = at; i + 1 < rank_; ++i) dims_[i] = dims_[i + 1];
    --rank_;
  }

  /// Product of the dims (1 for a scalar).
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < rank_; ++i) {
      if (i) s += ',';
      s += std::to_string(dims_[i]);
    }
    s += ']';
    return s;
  }

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
      if (a.dims_[i] != b.dims_[i]) return false;
    return true;
  }
  friend std::ostream& operator<<(std::ostream& out, const Shape& s) { return out << s.str(); }

 private:
  int64_t dims_[kMaxRank] = {};
  int rank_ = 0;
};

/// Row-major (C-order) strides of a contiguous tensor of this shape.
inline Shape contiguous_strides(const Shape& shape) {
  Shape strides = shape;
  int64_t step = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    strides[i] = step;
    step *= shape[i];
  }
  return strides;
}

/// NumPy broadcasting: dims align from the right; each pair must be equal or contain a 1.
inline Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  Shape out;
  int rank = a.rank() > b.rank() ? a.rank() : b.rank();
  for (int i = 0; i < rank; ++i) {
    int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      throw ShapeError(cat(op, ": shapes ", a, " and ", b, " do not broadcast (dim ", i, ": ", da, " vs ", db, ")"));
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

/// Wraps a possibly negative dim into [0, rank); out of range is a ShapeError naming op and shape.
inline int wrap_dim(int64_t dim, int rank, const char* op, const Shape& shape) {
  int64_t wrapped = dim < 0 ? dim + rank : dim;
  if (wrapped < 0 || wrapped >= rank)
    throw ShapeError(cat(op, ": dim ", dim, " is out of range for shape ", shape, " (rank ", rank, ")"));
  return static_cast<int>(wrapped);
}

}  // namespace tapegrad
