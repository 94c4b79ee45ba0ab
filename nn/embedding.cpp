#include "nn/embedding.h"

#include "autograd/ops/indexing.h"
#include "autograd/ops/views.h"
#include "autograd/tape.h"
#include "nn/init.h"
#include "nn/module_gradcheck.h"

namespace tapegrad::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Generator& gen, int64_t padding_idx)
    : num_embeddings_(num_embeddings), dim_(dim), padding_idx_(padding_idx) {
  if (num_embeddings <= 0 || dim <= 0)
    throw ValueError(cat("Embedding: num_embeddings and dim must be positive, got ", num_embeddings, " and ", dim));
  if (padding_idx < -1 || padding_idx >= num_embeddings)
    throw ValueError(
        cat("Embedding: padding_idx ", padding_idx, " is out of range [0, ", num_embeddings, "); pass -1 for none"));
  weight = register_parameter("weight", empty({num_embeddings, dim}));
  normal_(weight, 0, 1, gen);
  if (padding_idx >= 0) {
    NoGradGuard no_grad;
    select(weight, 0, padding_idx).fill_(0);
  }
}

Tensor Embedding::forward(const Tensor& ids) const {
  const ScopeName scope = enter_scope();
  return embedding(weight, ids, padding_idx_);
}

namespace {
// Built from a fixed seed and converted to the check's dtype (float64 by default); checks the weight over
// ids (2, 4) in which rows repeat (the scatter-add accumulates). The padding row reads out in the forward
// but gets no gradient, which central differences would rightly call wrong wherever it reaches the
// output; so "repeated-ids" uses no padding id, and "padding-masked" does, with the padded positions
// masked out of the output as a model masks them (tests/nn/test_embedding.cpp checks the skip itself).
constexpr int64_t kPadding = 0;

GradcheckCase embedding_case(std::string name, std::vector<int64_t> token_ids, bool mask_padding) {
  const Tensor id_tensor = ids(token_ids, {2, 4});
  std::vector<int> padded;
  for (int64_t id : token_ids) padded.push_back(id == kPadding);
  const Tensor padding_mask = unsqueeze(mask(padded, {2, 4}), -1);  // (2, 4, 1)
  return module_case<Embedding>(
      std::move(name), [](Generator& gen) { return std::make_unique<Embedding>(6, 3, gen, kPadding); }, {},
      [id_tensor, padding_mask, mask_padding](const Embedding& layer, const std::vector<Tensor>&) {
        const Tensor out = layer.forward(id_tensor);
        return mask_padding ? masked_fill(out, padding_mask, 0.0) : out;
      },
      202);
}

const bool registered = register_gradchecks({
    embedding_case("nn/embedding/repeated-ids", {2, 4, 5, 2, 1, 2, 3, 4}, false),
    embedding_case("nn/embedding/padding-masked", {2, 0, 5, 2, 1, 2, 0, 3}, true),
});
}  // namespace

}  // namespace tapegrad::nn
