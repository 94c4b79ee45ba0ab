#pragma once
// Elementwise arithmetic with NumPy broadcasting; gradients are summed over broadcast dims.
#include "autograd/tensor.h"

namespace tapegrad {

/// a + b.   a, b: broadcastable -> broadcast(a, b)
Tensor add(const Tensor& a, const Tensor& b);
/// a - b.   a, b: broadcastable -> broadcast(a, b)
Tensor sub(const Tensor& a, const Tensor& b);
/// a ⊙ b.   a, b: broadcastable -> broadcast(a, b)
Tensor mul(const Tensor& a, const Tensor& b);
/// a / b.   a, b: broadcastable -> broadcast(a, b)
Tensor div(const Tensor& a, const Tensor& b);
/// -x.      x: any -> same
Tensor neg(const Tensor& x);
/// x + c.   x: any -> same
Tensor add(const Tensor& x, double c);
/// c · x.   x: any -> same
Tensor mul(const Tensor& x, double c);
/// x^p for a constant exponent p.   x: any -> same
Tensor pow(const Tensor& x, double p);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& x, double c) { return add(x, c); }
inline Tensor operator+(double c, const Tensor& x) { return add(x, c); }
inline Tensor operator-(const Tensor& x, double c) { return add(x, -c); }
inline Tensor operator-(double c, const Tensor& x) { return add(neg(x), c); }
inline Tensor operator*(const Tensor& x, double c) { return mul(x, c); }
inline Tensor operator*(double c, const Tensor& x) { return mul(x, c); }
inline Tensor operator/(const Tensor& x, double c) { return mul(x, 1.0 / c); }

}  // namespace tapegrad
