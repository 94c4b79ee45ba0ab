#pragma once
// Absolute position information added to token embeddings: learned (a table of vectors, one per position,
// as GPT and seed 001 example 2.3 use) or fixed sinusoids (Vaswani et al. 2017, seed 003 §4.2): the
// positional components "learned" and "sinusoidal".
#include <cstdint>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/components.h"

namespace tapegrad::nn {

/// Learned absolute positions. The parameter is "weight" [context_length, dim] ~ N(0, 1), exactly an
/// nn.Embedding(context_length, dim) in PyTorch (registered as "pos_embed" it loads as "pos_embed.weight").
class PositionalEmbedding : public PositionalEncoding {
 public:
  PositionalEmbedding(int64_t context_length, int64_t dim, Generator& gen);

  /// The vectors of positions 0..seq_len-1 (rows of weight, a view; broadcasts over a batch when added to
  /// (B, T, dim) token embeddings). seq_len > context_length is a ShapeError.   -> (T, dim)
  Tensor forward(int64_t seq_len) const;
  /// forward(seq_len): the table's dtype is the model's.   -> (T, dim)
  Tensor forward(int64_t seq_len, DType) const override { return forward(seq_len); }

  int64_t context_length() const { return context_length_; }
  int64_t dim() const { return dim_; }

  Tensor weight;  // [context_length, dim]

 private:
  int64_t context_length_;
  int64_t dim_;
};

/// Fixed sinusoidal positions, no parameters:
///   PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
/// Each pair (2i, 2i+1) is a point on the unit circle turning at frequency ω_i = 10000^(-2i/d), so
/// PE(pos + k) is PE(pos) rotated pairwise by the angles k·ω_i and <PE(p), PE(q)> depends only on p - q.
/// An odd d ends with one sine column.
class SinusoidalPositionalEncoding : public PositionalEncoding {
 public:
  SinusoidalPositionalEncoding(int64_t context_length, int64_t dim);

  /// PE of positions 0..seq_len-1, a fresh tensor that needs no grad. seq_len > context_length is a
  /// ShapeError.   -> (T, dim)
  Tensor forward(int64_t seq_len, DType dtype = DType::float32) const override;

  int64_t context_length() const { return context_length_; }
  int64_t dim() const { return dim_; }

 private:
  int64_t context_length_;
  int64_t dim_;
  std::vector<double> table_;  // [context_length, dim], row-major, computed once in double
};

}  // namespace tapegrad::nn
