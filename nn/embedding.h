#pragma once
// Embedding: a learned table of vectors looked up by id, as PyTorch's nn.Embedding (parameter "weight",
// [num_embeddings, dim], initialised N(0, 1), the padding row zeroed and never updated).
#include <cstdint>

#include "autograd/random.h"
#include "autograd/tensor.h"
#include "nn/module.h"

namespace tapegrad::nn {

class Embedding : public Module {
 public:
  /// weight [num_embeddings, dim] ~ N(0, 1) from gen; padding_idx in [0, num_embeddings) names a row that
  /// starts at zero and gets no gradient, -1 means none.
  Embedding(int64_t num_embeddings, int64_t dim, Generator& gen, int64_t padding_idx = -1);

  /// The rows of weight for each id.   ids: int64 (...) -> (..., dim)
  Tensor forward(const Tensor& ids) const;

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t dim() const { return dim_; }
  int64_t padding_idx() const { return padding_idx_; }

  Tensor weight;  // [num_embeddings, dim]

 private:
  int64_t num_embeddings_;
  int64_t dim_;
  int64_t padding_idx_;
};

}  // namespace tapegrad::nn
