// Self-attention with trainable weights, causal masking, dropout and multi-head attention, step by step,
// on the six 3-d vectors of "Your journey starts with one step": seed 002 (ch. 3 of "Build a Large
// Language Model From Scratch", §3.3–3.6) and its exercise solutions 3.1–3.3 (seed 000). Every tensor
// the notebook prints is printed here, computed with tapegrad; attention_basics.cpp covers §3.3 in depth.
//
// The seed's modules (SelfAttention_v1/v2, CausalAttention, MultiHeadAttentionWrapper, MultiHeadAttention)
// live in seed_attention.h as tapegrad::nn::Module subclasses, written the way a user adds a layer: from
// existing ops and layers, parameters registered by name, nothing changed in the library.
//
// Random numbers come from tapegrad::Generator. The seeds below are the notebook's torch.manual_seed
// values, but the generators differ, so every number that depends on random weights (or on a dropout
// mask) differs from the notebook's. Every number that does not — the inputs, the §3.3 scores, weights
// and context vectors, the 4-D product, the shapes, the dropout scaling and the parameter count — equals
// the notebook's to the 4 printed decimals; and the identities between the modules hold exactly.
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/attention.h"
#include "nn/dropout.h"
#include "seed_attention.h"

using namespace tapegrad;

namespace {

void step(const std::string& title) { std::cout << "\n== " << title << " ==\n"; }

/// torch.stack((x, x), dim=0).   x: (T, C) -> (2, T, C)
Tensor stack_twice(const Tensor& x) { return concat({unsqueeze(x, 0), unsqueeze(x, 0)}, 0); }

/// 2360064 -> "2,360,064".
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

/// The n x n identity matrix.
Tensor identity(int64_t n) {
  std::vector<double> values(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i * n + i)] = 1.0;
  return tensor(values, {n, n});
}

/// One line per named parameter: name, shape, element count.
void print_parameters(const nn::Module& m) {
  for (const auto& [name, t] : m.named_parameters())
    std::cout << "  " << name << " " << t.shape() << " (" << grouped(t.numel()) << ")\n";
}

}  // namespace

int main() {
  const Tensor inputs = tensor({0.43, 0.15, 0.89,   // Your     (x^1)
                                0.55, 0.87, 0.66,   // journey  (x^2)
                                0.57, 0.85, 0.64,   // starts   (x^3)
                                0.22, 0.58, 0.33,   // with     (x^4)
                                0.77, 0.25, 0.10,   // one      (x^5)
                                0.05, 0.80, 0.55},  // step     (x^6)
                               {6, 3});
  std::cout << "inputs (one row per token):\n" << inputs << "\n";

  // ---------------------------------------------------------------------------------------------------
  step("3.3.1 attention without trainable weights, for the query x^2");
  const Tensor query = select(inputs, 0, 1);
  const Tensor scores_2 = matmul(inputs, query);  // x^(i) · x^(2) for every i
  std::cout << "attn_scores_2: " << scores_2 << "\n";
  std::cout << "x^1 . x^2 alone: " << matmul(select(inputs, 0, 0), query) << "\n";
  const Tensor weights_2_tmp = scores_2 / sum(scores_2);
  std::cout << "Attention weights (divided by their sum): " << weights_2_tmp << "\nSum: " << sum(weights_2_tmp) << "\n";
  const Tensor weights_2_naive = exp(scores_2) / sum(exp(scores_2));
  std::cout << "Attention weights (naive softmax): " << weights_2_naive << "\nSum: " << sum(weights_2_naive) << "\n";
  const Tensor weights_2 = softmax(scores_2, 0);
  std::cout << "Attention weights (softmax): " << weights_2 << "\nSum: " << sum(weights_2) << "\n";
  std::cout << "context vector z^2 = sum_i a_2i x^(i): " << matmul(weights_2, inputs) << "\n";

  step("3.3.2 all scores (inputs @ inputs.T), weights (softmax per row) and context vectors");
  const Tensor all_scores = matmul(inputs, transpose(inputs, 0, 1));
  std::cout << all_scores << "\n";
  const Tensor all_weights = softmax(all_scores, -1);
  std::cout << all_weights << "\n";
  std::cout << "All row sums: " << sum(all_weights, -1) << "\n";
  const Tensor all_context = matmul(all_weights, inputs);
  std::cout << all_context << "\n";
  std::cout << "Previous 2nd context vector: " << select(all_context, 0, 1) << "\n";

  // ---------------------------------------------------------------------------------------------------
  step("3.4.1 trainable weights, step by step for x^2 (d_in = 3, d_out = 2; random weights differ)");
  const Tensor x_2 = select(inputs, 0, 1);
  const int64_t d_in = inputs.size(1), d_out = 2;
  Generator gen_341(123);  // torch.manual_seed(123), then three torch.rand(d_in, d_out)
  const Tensor W_query = rand({d_in, d_out}, gen_341);
  const Tensor W_key = rand({d_in, d_out}, gen_341);
  const Tensor W_value = rand({d_in, d_out}, gen_341);
  const Tensor query_2 = matmul(x_2, W_query);
  std::cout << "query_2 = x_2 @ W_query: " << query_2 << "\n";
  const Tensor keys = matmul(inputs, W_key);
  const Tensor values = matmul(inputs, W_value);
  std::cout << "keys.shape: " << keys.shape() << "\nvalues.shape: " << values.shape() << "\n";
  const Tensor attn_score_22 = matmul(query_2, select(keys, 0, 1));
  std::cout << "attn_score_22 = query_2 . keys[1]: " << attn_score_22 << "\n";
  const Tensor attn_scores_2 = matmul(query_2, transpose(keys, 0, 1));
  std::cout << "attn_scores_2 = query_2 @ keys.T: " << attn_scores_2 << "\n";
  const int64_t d_k = keys.size(1);
  const Tensor attn_weights_2 = softmax(attn_scores_2 / std::sqrt(static_cast<double>(d_k)), -1);
  std::cout << "attn_weights_2 = softmax(attn_scores_2 / sqrt(d_k)): " << attn_weights_2 << "\n";
  const Tensor context_vec_2 = matmul(attn_weights_2, values);
  std::cout << "context_vec_2 = attn_weights_2 @ values: " << context_vec_2 << "\n";

  // ---------------------------------------------------------------------------------------------------
  step("3.4.2 SelfAttentionV1 (raw W, x @ W) and SelfAttentionV2 (nn::Linear, no bias)");
  Generator gen_v1(123);  // the same seed and the same three draws as above
  const seed::SelfAttentionV1 sa_v1(d_in, d_out, gen_v1);
  const Tensor v1_out = sa_v1.forward(inputs);
  std::cout << v1_out << "\n";
  std::cout << "row 2 is context_vec_2 of 3.4.1 (same Generator(123) draws), max |diff| = "
            << max_abs_diff(select(v1_out, 0, 1), context_vec_2) << "\n";
  Generator gen_v2(789);
  const seed::SelfAttentionV2 sa_v2(d_in, d_out, /*qkv_bias=*/false, gen_v2);
  std::cout << sa_v2.forward(inputs) << "\n";
  std::cout << "parameters of sa_v2, by name:\n";
  print_parameters(sa_v2);

  step("exercise 3.1: v1 with W = v2's weight^T computes v2 exactly");
  Generator gen_e1(123), gen_e2(123);
  seed::SelfAttentionV1 ex_v1(d_in, d_out, gen_e1);
  const seed::SelfAttentionV2 ex_v2(d_in, d_out, /*qkv_bias=*/false, gen_e2);
  // nn::Linear holds W as [d_out, d_in] and computes x Wᵀ; v1 computes x W with W [d_in, d_out].
  ex_v1.load_state_dict({{"W_query", transpose(ex_v2.W_query().weight, 0, 1)},
                         {"W_key", transpose(ex_v2.W_key().weight, 0, 1)},
                         {"W_value", transpose(ex_v2.W_value().weight, 0, 1)}});
  const Tensor ex_v1_out = ex_v1.forward(inputs), ex_v2_out = ex_v2.forward(inputs);
  std::cout << "sa_v1(inputs):\n" << ex_v1_out << "\nsa_v2(inputs):\n" << ex_v2_out << "\n";
  std::cout << "max |sa_v1 - sa_v2| = " << max_abs_diff(ex_v1_out, ex_v2_out) << "\n";

  // ---------------------------------------------------------------------------------------------------
  step("3.5.1 causal attention weights from sa_v2's query and key layers");
  const Tensor queries = sa_v2.W_query().forward(inputs);
  const Tensor keys_v2 = sa_v2.W_key().forward(inputs);
  const Tensor attn_scores = matmul(queries, transpose(keys_v2, 0, 1));
  const double scale = std::sqrt(static_cast<double>(keys_v2.size(-1)));
  const Tensor attn_weights = softmax(attn_scores / scale, -1);
  std::cout << attn_weights << "\n";

  std::cout << "\nmethod 1: zero the weights above the diagonal, then renormalise each row\n";
  const int64_t context_length = attn_scores.size(0);
  const Tensor mask_bool = nn::causal_mask(context_length);  // torch.triu(ones, diagonal=1).bool()
  // torch.tril(ones): 1 on and below the diagonal, i.e. ones with the future zeroed.
  const Tensor mask_simple = masked_fill(ones({context_length, context_length}), mask_bool, 0.0);
  std::cout << "mask_simple:\n" << mask_simple << "\n";
  const Tensor masked_simple = attn_weights * mask_simple;
  std::cout << "masked_simple = attn_weights * mask_simple:\n" << masked_simple << "\n";
  const Tensor row_sums = sum(masked_simple, -1, /*keepdim=*/true);
  const Tensor masked_simple_norm = masked_simple / row_sums;
  std::cout << "masked_simple / row_sums:\n" << masked_simple_norm << "\n";

  std::cout << "\nmethod 2: -inf above the diagonal of the scores, then softmax\n";
  std::cout << "mask (triu, diagonal=1, as bool):\n" << mask_bool << "\n";
  const Tensor masked = masked_fill(attn_scores, mask_bool, -INFINITY);
  std::cout << "masked = attn_scores.masked_fill(mask, -inf):\n" << masked << "\n";
  const Tensor causal_weights = softmax(masked / scale, -1);
  std::cout << "softmax(masked / sqrt(d_k)):\n" << causal_weights << "\n";
  std::cout << "max |method 1 - method 2| = " << max_abs_diff(masked_simple_norm, causal_weights) << "\n";

  // ---------------------------------------------------------------------------------------------------
  step("3.5.2 dropout p = 0.5: survivors scaled by 1 / (1 - p) = 2 (tapegrad's mask, not PyTorch's)");
  const auto dropout_rng = std::make_shared<Generator>(123);
  const nn::Dropout dropout(0.5, dropout_rng);  // training mode: the default for a new module
  const Tensor dropped = dropout.forward(ones({6, 6}));
  std::cout << dropped << "\n";
  int64_t zeroed = 0, doubled = 0;
  for (double v : dropped.to_vector()) {
    if (v == 0)
      ++zeroed;
    else if (v == 2)
      ++doubled;
  }
  std::cout << zeroed << " of 36 zeroed, " << doubled
            << " kept and scaled to 2, no other value: " << (zeroed + doubled == 36 ? "yes" : "no") << "\n";
  dropout_rng->reseed(123);  // torch.manual_seed(123) again: the same mask
  std::cout << "dropout(attn_weights), the same mask over the causal weights:\n"
            << dropout.forward(causal_weights) << "\n";

  // ---------------------------------------------------------------------------------------------------
  step("3.5.3 CausalAttention on a batch of two copies of the inputs");
  const Tensor batch = stack_twice(inputs);
  std::cout << "batch.shape: " << batch.shape() << "\n";
  Generator gen_ca(123);
  const seed::CausalAttention ca({.d_in = d_in, .d_out = d_out, .context_length = batch.size(1), .dropout = 0.0},
                                 gen_ca, nullptr);
  const Tensor ca_out = ca.forward(batch);
  std::cout << ca_out << "\ncontext_vecs.shape: " << ca_out.shape() << "\n";
  // The last token attends to every token, so its row is exercise 3.1's v2 row (same Generator(123) weights).
  std::cout << "last row vs exercise 3.1's sa_v2 last row (no mask hides anything there): max |diff| = "
            << max_abs_diff(select(select(ca_out, 0, 0), 0, 5), select(ex_v2_out, 0, 5)) << "\n";

  // ---------------------------------------------------------------------------------------------------
  step("3.6.1 MultiHeadAttentionWrapper: two CausalAttention heads, concatenated");
  Generator gen_w(123);
  const seed::MultiHeadAttentionWrapper wrapper(
      {.d_in = d_in, .d_out = d_out, .context_length = batch.size(1), .dropout = 0.0, .num_heads = 2}, gen_w, nullptr);
  const Tensor wrapper_out = wrapper.forward(batch);
  std::cout << wrapper_out << "\ncontext_vecs.shape: " << wrapper_out.shape() << "\n";
  std::cout << "parameters, by name:\n";
  print_parameters(wrapper);
  std::cout << "columns 0-1 are the CausalAttention output above (head 0 draws first from Generator(123)): "
            << "max |diff| = " << max_abs_diff(slice(wrapper_out, -1, 0, 2), ca_out) << "\n";

  step("exercise 3.2: d_out = 1 per head and an output projection -> 2 dims");
  Generator gen_32(123);
  const seed::MultiHeadAttentionWrapper wrapper_32(
      {.d_in = d_in, .d_out = 1, .context_length = batch.size(1), .dropout = 0.0, .num_heads = 2, .out_proj = true},
      gen_32, nullptr);
  const Tensor out_32 = wrapper_32.forward(batch);
  std::cout << out_32 << "\ncontext_vecs.shape: " << out_32.shape() << "\n";
  // The solution's CausalAttention calls masked_fill (not masked_fill_) and drops the result, so its printed
  // numbers come from unmasked attention; here the mask applies.
  std::cout << "(seed 000's solution discards its masked_fill result, so its numbers are unmasked; "
               "these are causal)\n";

  // ---------------------------------------------------------------------------------------------------
  step("3.6.2 MultiHeadAttention with weight splitting (d_out = 2, two heads of D = 1)");
  Generator gen_mha(123);
  const seed::SeedMultiHeadAttention mha(
      {.d_in = d_in, .d_out = 2, .context_length = batch.size(1), .dropout = 0.0, .num_heads = 2}, gen_mha, nullptr);
  const Tensor mha_out = mha.forward(batch);
  std::cout << mha_out << "\ncontext_vecs.shape: " << mha_out.shape() << "\n";
  std::cout << "parameters, by name:\n";
  print_parameters(mha);

  std::cout << "\nweight splitting is the wrapper in one product: stack the wrapper's heads (d_out = 2 each)\n"
               "into W_query/W_key/W_value of a MultiHeadAttention with d_out = 4, out_proj = identity:\n";
  Generator gen_split(7);
  seed::SeedMultiHeadAttention split(
      {.d_in = d_in, .d_out = 4, .context_length = batch.size(1), .dropout = 0.0, .num_heads = 2}, gen_split, nullptr);
  // Head h's [2, d_in] weight becomes rows [2h, 2h + 2) of the [4, d_in] weight: head h = columns 2h, 2h + 1.
  auto both_heads = [](const nn::Linear& head_0, const nn::Linear& head_1) {
    return concat({head_0.weight, head_1.weight}, 0);
  };
  const seed::CausalAttention &h0 = wrapper.head(0), &h1 = wrapper.head(1);
  split.load_state_dict({{"W_query.weight", both_heads(h0.W_query(), h1.W_query())},
                         {"W_key.weight", both_heads(h0.W_key(), h1.W_key())},
                         {"W_value.weight", both_heads(h0.W_value(), h1.W_value())},
                         {"out_proj.weight", identity(4)},
                         {"out_proj.bias", zeros({4})}});
  std::cout << "max |MultiHeadAttention - wrapper| = " << max_abs_diff(split.forward(batch), wrapper_out) << "\n";

  // ---------------------------------------------------------------------------------------------------
  step("the 4-D batched product inside MultiHeadAttention: a (b=1, heads=2, tokens=3, head_dim=4)");
  const Tensor a = tensor({0.2745, 0.6584, 0.2775, 0.8573,  //
                           0.8993, 0.0390, 0.9268, 0.7388,  //
                           0.7179, 0.7058, 0.9156, 0.4340,  //
                                                            //
                           0.0772, 0.3565, 0.1479, 0.5331,  //
                           0.4066, 0.2318, 0.4545, 0.9737,  //
                           0.4606, 0.5159, 0.4220, 0.5786},
                          {1, 2, 3, 4});
  std::cout << "a @ a.transpose(2, 3):\n" << matmul(a, transpose(a, 2, 3)) << "\n";
  const Tensor first_head = select(select(a, 0, 0), 0, 0);  // a[0, 0, :, :]
  std::cout << "First head:\n " << matmul(first_head, transpose(first_head, 0, 1)) << "\n";
  const Tensor second_head = select(select(a, 0, 0), 0, 1);  // a[0, 1, :, :]
  std::cout << "\nSecond head:\n " << matmul(second_head, transpose(second_head, 0, 1)) << "\n";

  // ---------------------------------------------------------------------------------------------------
  step("exercise 3.3: parameters of MultiHeadAttention(d_in = d_out = 768, context 1024, 12 heads, no qkv bias)");
  Generator gen_33(123);
  const seed::SeedMultiHeadAttention gpt2_mha(
      {.d_in = 768, .d_out = 768, .context_length = 1024, .dropout = 0.0, .num_heads = 12, .qkv_bias = false}, gen_33,
      nullptr);
  print_parameters(gpt2_mha);
  std::cout << "total: " << grouped(gpt2_mha.parameter_count()) << "\n";
  std::cout << "  W_query, W_key, W_value: 3 x (768 x 768), no bias = " << grouped(3 * 768 * 768) << "\n"
            << "  out_proj: 768 x 768 weight + 768 bias            =   " << grouped(768 * 768 + 768) << "\n"
            << "  total                                            = " << grouped(3 * 768 * 768 + 768 * 768 + 768)
            << "\n"
            << "The 12 heads split the 768 projected dims (64 each) rather than adding weights, so the count does\n"
            << "not depend on num_heads; the 1024 x 1024 causal mask is a buffer, not a parameter.\n";
  return 0;
}
