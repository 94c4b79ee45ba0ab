#include "nn/positions.h"

#include <cmath>

#include "autograd/ops/elementwise.h"
#include "autograd/ops/views.h"
#include "nn/classifier.h"
#include "nn/init.h"
#include "nn/module_gradcheck.h"

namespace tapegrad::nn {

namespace {

void check_sizes(const char* layer, int64_t context_length, int64_t dim) {
  if (context_length <= 0 || dim <= 0)
    throw ValueError(cat(layer, ": context_length and dim must be positive, got ", context_length, " and ", dim));
}

void check_length(const char* layer, int64_t seq_len, int64_t context_length) {
  if (seq_len < 0) throw ValueError(cat(layer, ": sequence length must be >= 0, got ", seq_len));
  if (seq_len > context_length)
    throw ShapeError(cat(layer, ": sequence length ", seq_len, " exceeds the context length ", context_length,
                         " (positions 0..", context_length - 1, " exist)"));
}

}  // namespace

PositionalEmbedding::PositionalEmbedding(int64_t context_length, int64_t dim, Generator& gen)
    : context_length_(context_length), dim_(dim) {
  check_sizes("PositionalEmbedding", context_length, dim);
  weight = register_parameter("weight", empty({context_length, dim}));
  normal_(weight, 0, 1, gen);
}

Tensor PositionalEmbedding::forward(int64_t seq_len) const {
  const ScopeName scope = enter_scope();
  check_length("PositionalEmbedding", seq_len, context_length_);
  // The same as looking up ids 0..T-1 in the table, and the same gradient (rows 0..T-1 only), as a view.
  return slice(weight, 0, 0, seq_len);
}

SinusoidalPositionalEncoding::SinusoidalPositionalEncoding(int64_t context_length, int64_t dim)
    : context_length_(context_length), dim_(dim) {
  check_sizes("SinusoidalPositionalEncoding", context_length, dim);
  table_.resize(context_length * dim);
  for (int64_t c = 0; c < dim; c += 2) {
    // c = 2i: the pair's frequency ω_i = 1 / 10000^(2i/d).
    const double frequency = 1.0 / std::pow(10000.0, static_cast<double>(c) / static_cast<double>(dim));
    for (int64_t pos = 0; pos < context_length; ++pos) {
      const double angle = static_cast<double>(pos) * frequency;
      table_[pos * dim + c] = std::sin(angle);
      if (c + 1 < dim) table_[pos * dim + c + 1] = std::cos(angle);
    }
  }
}

Tensor SinusoidalPositionalEncoding::forward(int64_t seq_len, DType dtype) const {
  const ScopeName scope = enter_scope();
  check_length("SinusoidalPositionalEncoding", seq_len, context_length_);
  if (!is_floating(dtype))
    throw DTypeError(cat("SinusoidalPositionalEncoding: dtype must be float32 or float64, got ", dtype_name(dtype)));
  return tensor(std::vector<double>(table_.begin(), table_.begin() + seq_len * dim_), {seq_len, dim_}, dtype);
}

namespace {

// One initialiser runs every registration of this file when the library loads.
const bool registered = [] {
  register_component<PositionalKind>(
      {.name = "learned",
       .help = "a learned vector per position (GPT, BERT)",
       .make = [](const ClassifierOptions& o, Generator& init) -> std::unique_ptr<PositionalEncoding> {
         return std::make_unique<PositionalEmbedding>(o.context_length, o.d_model, init);
       },
       .parameter_count = [](const ClassifierOptions& o) { return o.context_length * o.d_model; }});
  register_component<PositionalKind>(
      {.name = "sinusoidal",
       .help = "fixed sines and cosines (Vaswani et al. 2017), no parameters",
       .make = [](const ClassifierOptions& o, Generator&) -> std::unique_ptr<PositionalEncoding> {
         return std::make_unique<SinusoidalPositionalEncoding>(o.context_length, o.d_model);
       },
       .parameter_count = [](const ClassifierOptions&) { return int64_t{0}; }});
  // The positions are added to token vectors x (2, 3, 4) as a model adds them: checks x and the table,
  // of which only rows 0..2 get a gradient (rows 3, 4 have none, and central differences agree).
  register_gradchecks({module_case<PositionalEmbedding>(
      "nn/positional_embedding/added-to-batch",
      [](Generator& gen) { return std::make_unique<PositionalEmbedding>(5, 4, gen); }, {{"x", {2, 3, 4}}},
      [](const PositionalEmbedding& layer, const std::vector<Tensor>& in) { return in[0] + layer.forward(3); }, 303)});
  return true;
}();

}  // namespace

}  // namespace tapegrad::nn
