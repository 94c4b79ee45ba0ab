// LanguageModel: PyTorch's state names and logits (untied and tied), causality for every positional
// component, the parameter count from the options, the tied head's shared tensor and gradient, and the options
// it refuses. (Its gradient checks are registered in
// nn/language_model.cpp and run in test_module.cpp.)
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "nn/language_model.h"
#include "support/nn_fixtures.h"

using namespace tapegrad;
using namespace tapegrad::nn;
using namespace tapegrad::testing;
using Catch::Matchers::Contains;

namespace {

/// vocab 10, d_model 8, 2 heads, d_ff 16, 2 layers, context 12, learned positions, pre-LN, no dropout.
LanguageModelOptions names_config() {
  LanguageModelOptions o;
  o.vocab_size = 10;
  o.d_model = 8;
  o.n_heads = 2;
  o.d_ff = 16;
  o.n_layers = 2;
  o.context_length = 12;
  o.dropout = 0;
  return o;
}

LanguageModel make_model(const LanguageModelOptions& options, uint64_t seed = 1) {
  Generator init(seed);
  return LanguageModel(options, init, options.dropout > 0 ? std::make_shared<Generator>(seed + 1) : nullptr);
}

const Tensor kIds = ids({3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, {2, 5});

}  // namespace

// /usr/bin/python3, PyTorch 1.13:
//   class LM(nn.Module):
//       def __init__(self):
//           super().__init__()
//           self.embed = nn.Embedding(10, 8)
//           self.pos_embed = nn.Embedding(12, 8)
//           layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu",
//                                              batch_first=True, norm_first=True)
//           self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8), enable_nested_tensor=False)
//           self.head = nn.Linear(8, 10, bias=False)
//       def forward(self, ids):
//           T = ids.shape[1]
//           x = self.embed(ids) + self.pos_embed(torch.arange(T))
//           causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
//           return self.head(self.encoder(x, mask=causal))
TEST_CASE("nn: LanguageModel state names and shapes are PyTorch's: embed, pos_embed, encoder with its norm, head") {
  const LanguageModel model = make_model(names_config());
  std::vector<std::string> names;
  for (const auto& [name, t] : model.state_dict()) names.push_back(name);
  REQUIRE(names.size() == 2 + 2 * 12 + 2 + 1);
  CHECK(names.front() == "embed.weight");
  CHECK(names[1] == "pos_embed.weight");
  CHECK(names[2] == "encoder.layers.0.self_attn.in_proj_weight");
  CHECK(names[names.size() - 3] == "encoder.norm.weight");
  CHECK(names[names.size() - 2] == "encoder.norm.bias");
  CHECK(names.back() == "head.weight");  // no bias
  CHECK(model.head().weight.shape() == Shape({10, 8}));
  // sum(p.numel() for p in LM().parameters())
  CHECK(model.parameter_count() == 1472);
  CHECK(parameter_count(names_config()) == 1472);
  // Every id is a token: no padding row is kept at zero.
  const Tensor row0 = select(model.embed().weight, 0, 0);
  CHECK(max_abs_diff(row0, zeros_like(row0)) > 0);
}

// The PyTorch model above, float64, with the fill() of test_attention.cpp (fill_deterministic) and
//   ids = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]]); out = m(ids)
//   print(out[:, -1]); print(out[:, 0])   # flat, "%.12g"
TEST_CASE("nn: LanguageModel gives PyTorch's logits for the same weights (causal mask, pre-LN, GELU)") {
  const std::vector<double> kLastPosition = {
      0.612635683922, 0.955066425597, 0.868798178886, 0.392554020114, -0.259895171941, -0.795685674808,
      -0.97431814686, -0.715610144228, -0.135687473498, 0.505140995055, 0.543953738552, 0.957316045079,
      0.940969580475, 0.502251753586, -0.161910935468, -0.7533969474,  -1.00670699529, -0.808138243003,
      -0.246821897499, 0.425284959465};
  const std::vector<double> kFirstPosition = {
      0.628524200541, 0.95170375741,  0.847693720853, 0.363180893232, -0.284352303818, -0.804248781865,
      -0.963143522279, -0.68971372211, -0.106693335339, 0.524218301404, 0.645870815455, 0.964052667186,
      0.849501892058, 0.353636695234, -0.300964783632, -0.820472728871, -0.971696521889, -0.686756604417,
      -0.0935534565661, 0.541642866959};
  LanguageModel model = make_model(names_config());
  fill_deterministic(model);
  const Tensor logits = model.forward(kIds);
  REQUIRE(logits.shape() == Shape({2, 5, 10}));
  CHECK(max_abs_diff(select(logits, 1, 4), tensor(kLastPosition, {2, 10}, DType::float64)) < 1e-10);
  CHECK(max_abs_diff(select(logits, 1, 0), tensor(kFirstPosition, {2, 10}, DType::float64)) < 1e-10);
  // Position 0 sees only itself: with the same token at position 0 the rows agree whatever follows.
  const Tensor same_first = model.forward(ids({3, 9, 9, 9, 9}, {1, 5}));
  CHECK(max_abs_diff(select(select(same_first, 1, 0), 0, 0), select(select(logits, 1, 0), 0, 0)) < 1e-12);
}

// The same script with tie_embeddings: LM(tie=True) adds, at the end of __init__,
//           if tie: self.head.weight = self.embed.weight
// and fill() walks m.named_parameters(), which lists the shared tensor once, as embed.weight (p = 0):
//   print(list(m.state_dict())[-1], sum(p.numel() for p in m.parameters()))   # head.weight 1392
TEST_CASE("nn: a tied LanguageModel gives PyTorch's logits and names, its head reading the embedding's table") {
  const std::vector<double> kLastPosition = {
      -0.567970769634, 0.0608429144515, 0.66234614643,  0.966543227416, 0.836889748148, 0.331583038062,
      -0.322560767722, -0.831917288443, -0.967852557597, -0.669349549759, -0.671121455766, -0.0460253120677,
      0.599730132591,  0.976285766372,  0.914617723555,  0.442406830169,  -0.228386439758, -0.79666428975,
      -1.00734483976,  -0.765860281469};
  const std::vector<double> kFirstPosition = {
      -0.53977112617,  0.088166381846,  0.676528800953, 0.961218925851,  0.814448400384,  0.302097852439,
      -0.345854827738, -0.838564259063, -0.954868824796, -0.642563098868, -0.533430553782, 0.103336190351,
      0.693718600285,  0.972712760987,  0.815087053741,  0.291594652807,  -0.362785327595, -0.85432249542,
      -0.962381425788, -0.638457896487};
  LanguageModelOptions options = names_config();
  options.tie_embeddings = true;
  LanguageModel model = make_model(options);
  // The state keeps both names, in the untied model's order; the parameters list the table once.
  std::vector<std::string> state, parameters;
  for (const auto& [name, t] : model.state_dict()) state.push_back(name);
  for (const auto& [name, t] : model.named_parameters()) parameters.push_back(name);
  REQUIRE(state.size() == 2 + 2 * 12 + 2 + 1);
  CHECK(state.front() == "embed.weight");
  CHECK(state.back() == "head.weight");
  CHECK(parameters == std::vector<std::string>(state.begin(), state.end() - 1));
  CHECK(&model.head().weight.impl() == &model.embed().weight.impl());
  CHECK(model.parameter_count() == 1392);  // sum(p.numel() for p in LM(tie=True).parameters())
  CHECK(parameter_count(options) == 1392);
  // The shared table takes the values the untied model's head draws (U(±1/√C)), not the embedding's N(0, 1).
  CHECK(max_abs_diff(model.embed().weight, make_model(names_config()).head().weight) == 0);

  fill_deterministic(model);
  const Tensor logits = model.forward(kIds);
  REQUIRE(logits.shape() == Shape({2, 5, 10}));
  CHECK(max_abs_diff(select(logits, 1, 4), tensor(kLastPosition, {2, 10}, DType::float64)) < 1e-10);
  CHECK(max_abs_diff(select(logits, 1, 0), tensor(kFirstPosition, {2, 10}, DType::float64)) < 1e-10);
}

TEST_CASE("nn: a tied LanguageModel's table gets the sum of the lookup's and the head's gradients") {
  // The same values in an untied model, whose two tables get one part each: from one seed the two draw the
  // same values, and the untied embedding is then given the head's (which the tied table starts from).
  LanguageModelOptions options = micro_language_model();
  LanguageModel untied = make_model(options, 4);
  options.tie_embeddings = true;
  LanguageModel tied = make_model(options, 4);
  untied.to(DType::float64);
  tied.to(DType::float64);
  {
    NoGradGuard no_grad;
    Tensor(untied.embed().weight).copy_(untied.head().weight);
  }
  const NamedTensors untied_state = untied.state_dict(), tied_state = tied.state_dict();
  REQUIRE(untied_state.size() == tied_state.size());
  for (size_t i = 0; i < tied_state.size(); ++i) {
    INFO(tied_state[i].first);
    REQUIRE(max_abs_diff(untied_state[i].second, tied_state[i].second) == 0);
  }
  const Tensor id_tensor = ids({3, 1, 4, 1, 5, 2, 6, 5, 0, 2}, {2, 5});
  Generator gen(11);
  const Tensor r = randn({2, 5, 7}, gen, DType::float64);
  sum(untied.forward(id_tensor) * r).backward();
  sum(tied.forward(id_tensor) * r).backward();
  const Tensor both = untied.embed().weight.grad() + untied.head().weight.grad();
  CHECK(max_abs_diff(tied.embed().weight.grad(), both) < 1e-12);
  // Neither part alone: each use contributes.
  CHECK(max_abs_diff(tied.embed().weight.grad(), untied.head().weight.grad()) > 1e-6);
  CHECK(max_abs_diff(tied.embed().weight.grad(), untied.embed().weight.grad()) > 1e-6);
}

TEST_CASE("nn: a LanguageModel's position t depends on positions 0..t only, for every positional component") {
  for (const std::string positional : {"learned", "sinusoidal", "rope", "alibi"}) {
    for (const bool norm_first : {true, false}) {
      INFO(positional << (norm_first ? " pre-LN" : " post-LN"));
      LanguageModelOptions options = names_config();
      options.positional = positional;
      options.norm_first = norm_first;
      const LanguageModel model = make_model(options, 3);
      const std::vector<int64_t> base = {3, 1, 4, 1, 5, 9, 2, 6};
      const Tensor before = model.forward(ids(base, {1, 8}));
      for (int64_t changed = 1; changed < 8; ++changed) {
        std::vector<int64_t> edited = base;
        edited[static_cast<size_t>(changed)] = (edited[static_cast<size_t>(changed)] + 4) % 10;
        const Tensor after = model.forward(ids(edited, {1, 8}));
        for (int64_t t = 0; t < 8; ++t) {
          const double diff = max_abs_diff(select(after, 1, t), select(before, 1, t));
          if (t < changed)
            CHECK(diff == 0.0);
          else if (t == changed)
            CHECK(diff > 0.0);
        }
      }
    }
  }
}

TEST_CASE("nn: parameter_count(LanguageModelOptions) equals the built model's for every variant") {
  for (const std::string positional : {"learned", "sinusoidal", "rope", "alibi"})
    for (const std::string ffn : {"dense", "moe"})
      for (const bool tied : {false, true}) {
        LanguageModelOptions options = names_config();
        options.positional = positional;
        options.ffn = ffn;
        options.tie_embeddings = tied;
        INFO(positional << " " << ffn << (tied ? " tied" : ""));
        CHECK(parameter_count(options) == make_model(options).parameter_count());
      }
}

TEST_CASE("nn: LanguageModel refuses long sequences, bad ids and options, naming them") {
  const LanguageModel model = make_model(names_config());
  CHECK_THROWS_WITH(model.forward(ids(std::vector<int64_t>(13, 1), {1, 13})),
                    "LanguageModel: sequence length T = 13 exceeds context_length 12");
  CHECK_THROWS_AS(model.forward(tensor({1.0, 2.0}, {1, 2})), DTypeError);
  CHECK_THROWS_WITH(model.forward(ids({1, 2}, {2})), Contains("must be (B, T)"));
  LanguageModelOptions options = names_config();
  options.n_heads = 3;
  CHECK_THROWS_WITH(make_model(options), Contains("LanguageModel: n_heads = 3 does not divide d_model = 8"));
  options = names_config();
  options.vocab_size = 0;
  CHECK_THROWS_WITH(make_model(options), Contains("vocab_size = 0 is outside"));
  options = names_config();
  options.attention = "nope";
  CHECK_THROWS_WITH(make_model(options), Contains("attention = 'nope' is not registered"));
}
