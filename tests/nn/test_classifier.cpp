// SequenceClassifier: PyTorch's state names and numbers, padding invariance, pooling, limits, options,
// gradient checks of the whole model per named parameter.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "support/nn_fixtures.h"
#include "nn/classifier.h"

using namespace tapegrad;
using namespace tapegrad::nn;
using namespace tapegrad::testing;

namespace {


/// The configuration of the state-names test: vocab 10, d_model 8, 2 heads, d_ff 16, 2 layers, 3 classes,
/// context 12, learned positions, final norm.
ClassifierOptions names_config(double dropout = 0.0) {
  ClassifierOptions o{10};
  o.d_model = 8;
  o.n_heads = 2;
  o.d_ff = 16;
  o.n_layers = 2;
  o.num_classes = 3;
  o.context_length = 12;
  o.dropout = dropout;
  o.positional = "learned";
  o.final_norm = true;
  return o;
}

SequenceClassifier make_classifier(const ClassifierOptions& options, uint64_t seed = 1) {
  Generator init(seed);
  return SequenceClassifier(options, init, options.dropout > 0 ? std::make_shared<Generator>(seed + 1) : nullptr);
}

// Row 0: five tokens; row 1: three tokens and two pads (id 0).
const Tensor kIds = ids({3, 1, 4, 1, 5, 9, 2, 6, 0, 0}, {2, 5});
const Tensor kPad = mask({0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 5});

}  // namespace

// Generated with /usr/bin/python3 and PyTorch 1.13 (python3-torch is installed there):
//   class Classifier(nn.Module):
//       def __init__(self):
//           super().__init__()
//           self.embed = nn.Embedding(10, 8, padding_idx=0)
//           self.pos_embed = nn.Embedding(12, 8)
//           layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
//           self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8))
//           self.head = nn.Linear(8, 3)
//   print([(k, list(v.shape)) for k, v in Classifier().state_dict().items()])
TEST_CASE("nn: SequenceClassifier state names and shapes are exactly PyTorch's, in PyTorch's order") {
  const std::vector<std::pair<std::string, std::vector<int64_t>>> pytorch = {
      {"embed.weight", {10, 8}},
      {"pos_embed.weight", {12, 8}},
      {"encoder.layers.0.self_attn.in_proj_weight", {24, 8}},
      {"encoder.layers.0.self_attn.in_proj_bias", {24}},
      {"encoder.layers.0.self_attn.out_proj.weight", {8, 8}},
      {"encoder.layers.0.self_attn.out_proj.bias", {8}},
      {"encoder.layers.0.linear1.weight", {16, 8}},
      {"encoder.layers.0.linear1.bias", {16}},
      {"encoder.layers.0.linear2.weight", {8, 16}},
      {"encoder.layers.0.linear2.bias", {8}},
      {"encoder.layers.0.norm1.weight", {8}},
      {"encoder.layers.0.norm1.bias", {8}},
      {"encoder.layers.0.norm2.weight", {8}},
      {"encoder.layers.0.norm2.bias", {8}},
      {"encoder.layers.1.self_attn.in_proj_weight", {24, 8}},
      {"encoder.layers.1.self_attn.in_proj_bias", {24}},
      {"encoder.layers.1.self_attn.out_proj.weight", {8, 8}},
      {"encoder.layers.1.self_attn.out_proj.bias", {8}},
      {"encoder.layers.1.linear1.weight", {16, 8}},
      {"encoder.layers.1.linear1.bias", {16}},
      {"encoder.layers.1.linear2.weight", {8, 16}},
      {"encoder.layers.1.linear2.bias", {8}},
      {"encoder.layers.1.norm1.weight", {8}},
      {"encoder.layers.1.norm1.bias", {8}},
      {"encoder.layers.1.norm2.weight", {8}},
      {"encoder.layers.1.norm2.bias", {8}},
      {"encoder.norm.weight", {8}},
      {"encoder.norm.bias", {8}},
      {"head.weight", {3, 8}},
      {"head.bias", {3}},
  };
  const SequenceClassifier model = make_classifier(names_config(0.1));
  std::vector<std::pair<std::string, std::vector<int64_t>>> ours;
  for (const auto& [name, t] : model.state_dict()) ours.emplace_back(name, t.shape().vec());
  CHECK(ours == pytorch);
  CHECK(model.parameter_count() == 1419);  // sum(p.numel() for p in Classifier().parameters())
  for (double w : select(model.embed().weight, 0, 0).to_vector()) CHECK(w == 0.0);  // padding_idx row
}

TEST_CASE("nn: sinusoidal positions add no parameters and no state entry") {
  ClassifierOptions options = names_config();
  options.positional = "sinusoidal";
  const SequenceClassifier model = make_classifier(options);
  CHECK(model.pos_embed().parameter_count() == 0);
  for (const auto& [name, _] : model.state_dict()) CHECK(name.find("pos") == std::string::npos);
  CHECK(model.parameter_count() == 1419 - 12 * 8);
  CHECK(model.forward(kIds, kPad).shape() == Shape({2, 3}));
}

// PyTorch 1.13, float64, the fill() of test_attention.cpp on the Classifier above built with dropout=0.0
// (and enable_nested_tensor=False), with
//   def forward(self, ids, pad):
//       x = self.embed(ids) + self.pos_embed(torch.arange(ids.shape[1]))
//       x = self.encoder(x, src_key_padding_mask=pad)
//       keep = (~pad).unsqueeze(-1).double()
//       return self.head((x * keep).sum(1) / keep.sum(1).clamp(min=1))
//   ids = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 0, 0]]); print(m(ids, ids == 0))   # flat, "%.12g"
TEST_CASE("nn: SequenceClassifier gives PyTorch's logits for the same weights (padding, mean pooling)") {
  const std::vector<double> kClassifierLogits = {0.406681883284, 1.28382941428, 1.57700735397,
                                                 0.40679162837,  1.28408732682, 1.5772976652};
  SequenceClassifier model = make_classifier(names_config());
  fill_deterministic(model);
  CHECK(max_abs_diff(model.forward(kIds, kPad), tensor(kClassifierLogits, {2, 3}, DType::float64)) < 1e-10);
}

TEST_CASE("nn: changing pad tokens leaves non-pad encoder outputs and the logits exactly unchanged") {
  for (std::string pool : {"mean", "cls"}) {
    ClassifierOptions options = names_config();
    options.pool = pool;
    const SequenceClassifier model = make_classifier(options, 5);
    const Tensor other_pads = ids({3, 1, 4, 1, 5, 9, 2, 6, 7, 8}, {2, 5});  // real tokens where the pads were
    INFO(pool);
    CHECK(max_abs_diff(model.forward(other_pads, kPad), model.forward(kIds, kPad)) == 0.0);
    const Tensor a = model.encode(kIds, kPad), b = model.encode(other_pads, kPad);
    CHECK(max_abs_diff(select(a, 0, 0), select(b, 0, 0)) == 0.0);
    CHECK(max_abs_diff(slice(select(a, 0, 1), 0, 0, 3), slice(select(b, 0, 1), 0, 0, 3)) == 0.0);
    // Without the mask the pads are ordinary tokens and do change the result.
    CHECK(max_abs_diff(model.forward(other_pads), model.forward(kIds)) > 0.0);
  }
}

TEST_CASE("nn: mean pooling averages the non-pad positions, and cls pooling takes the first position") {
  ClassifierOptions options = names_config();
  SequenceClassifier mean_model = make_classifier(options, 7);
  mean_model.to(DType::float64);
  const Tensor x = mean_model.encode(kIds, kPad);
  const Tensor row0 = mean(select(x, 0, 0), 0);
  const Tensor row1 = mean(slice(select(x, 0, 1), 0, 0, 3), 0);
  const Tensor expected = mean_model.head().forward(concat({unsqueeze(row0, 0), unsqueeze(row1, 0)}, 0));
  CHECK(max_abs_diff(mean_model.forward(kIds, kPad), expected) < 1e-14);
  CHECK(max_abs_diff(mean_model.pool(x), mean(x, 1)) == 0.0);  // no mask: every position
  // An all-pad row pools to zeros (no division by zero): the logits are the head's bias.
  const Tensor all_pad = mask({0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, {2, 5});
  const Tensor logits = mean_model.forward(kIds, all_pad);
  for (double v : logits.to_vector()) REQUIRE(std::isfinite(v));
  CHECK(max_abs_diff(select(logits, 0, 1), mean_model.head().bias) < 1e-15);

  options.pool = "cls";
  SequenceClassifier cls_model = make_classifier(options, 7);
  const Tensor encoded = cls_model.encode(kIds, kPad);
  CHECK(max_abs_diff(cls_model.forward(kIds, kPad), cls_model.head().forward(select(encoded, 1, 0))) == 0.0);
}

TEST_CASE("nn: SequenceClassifier checks lengths, dtypes and options") {
  SequenceClassifier model = make_classifier(names_config());
  CHECK_NOTHROW(model.forward(ids(std::vector<int64_t>(12, 1), {1, 12})));
  try {
    model.forward(ids(std::vector<int64_t>(13, 1), {1, 13}));
    FAIL("no error");
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    CHECK(message.find("13") != std::string::npos);
    CHECK(message.find("12") != std::string::npos);
  }
  CHECK_THROWS_AS(model.forward(tensor({1, 2, 3}, {1, 3})), DTypeError);
  CHECK_THROWS_AS(model.forward(ids({1, 2, 3}, {3})), ShapeError);
  CHECK_THROWS_AS(model.forward(kIds, mask({0, 0, 0}, {1, 3})), ShapeError);
  ClassifierOptions bad = names_config();
  bad.pad_id = 10;
  CHECK_THROWS_AS(make_classifier(bad), ValueError);
  bad = names_config();
  bad.n_heads = 3;
  CHECK_THROWS_AS(make_classifier(bad), ValueError);

  auto rng = std::make_shared<Generator>(3);
  Generator init(4);
  SequenceClassifier with_dropout(names_config(0.25), init, rng);
  CHECK(with_dropout.dropout_rng() == rng);
  CHECK(with_dropout.options().dropout == 0.25);
  CHECK(with_dropout.options().num_classes == 3);
  CHECK(with_dropout.encoder().n_layers() == 2);
}

TEST_CASE("nn: a component name that is not registered is a ValueError naming it and the registered ones") {
  ClassifierOptions options = names_config();
  options.pool = "max";
  try {
    validate(options, "config.json");
    FAIL("no error");
  } catch (const ValueError& e) {
    CHECK(std::string(e.what()) == "config.json: pool = 'max' is not registered (registered: mean or cls)");
  }
  options = names_config();
  options.positional = "xpos";
  CHECK_THROWS_WITH(SequenceClassifier(options, *std::make_unique<Generator>(1), nullptr),
                    Catch::Contains("positional = 'xpos' is not registered (registered: "));
  CHECK(prepends_cls(names_config()) == false);
  options = names_config();
  options.pool = "cls";
  CHECK(prepends_cls(options));
}

TEST_CASE("nn: a classifier's state loads into another, which then gives the same logits") {
  const SequenceClassifier source = make_classifier(names_config(), 21);
  SequenceClassifier target = make_classifier(names_config(), 22);
  CHECK(max_abs_diff(source.forward(kIds, kPad), target.forward(kIds, kPad)) > 0.0);
  target.load_state_dict(source.state_dict());
  CHECK(max_abs_diff(source.forward(kIds, kPad), target.forward(kIds, kPad)) == 0.0);
}

TEST_CASE("nn: a training step's gradients on 2 threads are as accurate as on 1 (float32 against float64)") {
  ClassifierOptions options{50};
  options.d_model = 128;  // products of about 0.2 GFLOP and 256 heads: split between the threads
  options.n_heads = 4;
  options.d_ff = 512;
  options.n_layers = 2;
  options.num_classes = 4;
  options.context_length = 32;
  options.dropout = 0;  // the same function on every run
  // GELU: relu's kink would let a pre-activation within rounding of 0 land on either side, which moves
  // one element's whole contribution (a legitimate difference, not an inaccuracy; docs/performance.md).
  options.activation = "gelu";
  Generator gen(7);
  std::vector<int64_t> tokens(64 * 32), labels(64);
  std::vector<int> pads(64 * 32);
  for (size_t i = 0; i < tokens.size(); ++i) {
    pads[i] = static_cast<int>(i % 32) >= 16 + static_cast<int>(i / 32) % 16;  // lengths 16..31
    tokens[i] = pads[i] ? 0 : 1 + static_cast<int64_t>(gen.next_u64() % 49);
  }
  for (size_t b = 0; b < labels.size(); ++b) labels[b] = static_cast<int64_t>(b % 4);
  const Tensor batch = ids(tokens, {64, 32}), padding = mask(pads, {64, 32}), targets = ids(labels, {64});

  SequenceClassifier model = make_classifier(options, 3);
  auto gradients_on = [&](int threads) {
    set_num_threads(threads);
    for (const auto& [_, p] : model.named_parameters()) p.zero_grad();
    backward(cross_entropy(model.forward(batch, padding), targets));
    std::vector<std::vector<double>> grads;
    for (const auto& [_, p] : model.named_parameters()) grads.push_back(p.grad().to_vector());
    return grads;
  };
  const auto one = gradients_on(1), two = gradients_on(2);
  model.to(DType::float64);  // the same weights, exactly, in float64: the reference
  const auto exact = gradients_on(1);
  set_num_threads(0);
  // Splitting a product may change which BLAS kernel sums a block (and so the order of its float32 sums),
  // never what is summed: two threads' error against float64 stays that of one thread's.
  const auto names = model.named_parameters();
  // the larger error; std::max would drop a NaN one: it counts as infinite
  const auto worse = [](double error, double difference) {
    return std::isnan(difference) ? std::numeric_limits<double>::infinity() : std::max(error, difference);
  };
  for (size_t i = 0; i < one.size(); ++i) {
    double scale = 0, error_one = 0, error_two = 0;
    for (size_t k = 0; k < one[i].size(); ++k) {
      scale = std::max(scale, std::abs(exact[i][k]));
      error_one = worse(error_one, std::abs(one[i][k] - exact[i][k]));
      error_two = worse(error_two, std::abs(two[i][k] - exact[i][k]));
    }
    INFO(names[i].first << ": largest gradient " << scale << ", error on 1 thread " << error_one << ", on 2 " << error_two);
    CHECK(error_two <= 2 * error_one + 1e-6 * scale);
    CHECK(error_two <= 1e-2 * scale);
  }
}

TEST_CASE("nn: parameter_count(options) equals the built model's count for every variant") {
  int variants = 0;
  for (std::string positional : {"learned", "sinusoidal"})
    for (std::string pool : {"mean", "cls"})
      for (bool final_norm : {false, true})
        for (int64_t n_layers = 0; n_layers <= 3; ++n_layers) {
          if (pool == "cls" && n_layers == 0) continue;  // refused: the <cls> vector would never see the text
          ClassifierOptions o = names_config();
          o.positional = positional;
          o.pool = pool;
          o.final_norm = final_norm;
          o.n_layers = n_layers;
          o.d_ff = 16 + 4 * n_layers;  // F != 2C, so a term with F and C swapped would show
          INFO(positional << ", " << pool << ", final_norm " << final_norm
                                           << ", n_layers " << n_layers);
          CHECK(parameter_count(o) == make_classifier(o).parameter_count());
          ++variants;
        }
  CHECK(variants == 28);
  // A size no machine can allocate is still counted exactly, without building anything.
  ClassifierOptions big{kMaxClassifierSize};
  big.d_model = 1024;
  big.n_heads = 8;
  big.d_ff = 4096;
  big.n_layers = 0;
  big.context_length = 1;
  big.num_classes = 2;
  CHECK(parameter_count(big) == kMaxClassifierSize * 1024 + 1024 + 2 * 1024 + 2);
}

TEST_CASE("nn: validate names the first option out of range, and the constructor calls it") {
  const std::pair<std::function<void(ClassifierOptions&)>, std::string> cases[] = {
      {[](ClassifierOptions& o) { o.vocab_size = 0; }, "vocab_size = 0 is outside [1, 16777216]"},
      {[](ClassifierOptions& o) { o.vocab_size = int64_t{1} << 60; }, "vocab_size = 1152921504606846976"},
      {[](ClassifierOptions& o) { o.d_model = -8; }, "d_model = -8 is outside"},
      {[](ClassifierOptions& o) { o.d_ff = 0; }, "d_ff = 0 is outside"},
      {[](ClassifierOptions& o) { o.context_length = 0; }, "context_length = 0 is outside"},
      {[](ClassifierOptions& o) { o.num_classes = 1; }, "num_classes = 1 is outside [2, "},
      {[](ClassifierOptions& o) { o.n_heads = 0; }, "n_heads = 0 must be >= 1"},
      {[](ClassifierOptions& o) { o.n_heads = 3; }, "n_heads = 3 does not divide d_model = 8"},
      {[](ClassifierOptions& o) { o.n_layers = -1; }, "n_layers = -1 is outside [0, 65536]"},
      {[](ClassifierOptions& o) { o.dropout = 1.0; }, "dropout = 1 is outside [0, 1)"},
      {[](ClassifierOptions& o) { o.dropout = std::nan(""); }, "dropout = nan"},
      {[](ClassifierOptions& o) { o.settings.set("norm", "eps", 0.0); }, "norm.eps must be a finite number in (0, 1], got 0"},
      {[](ClassifierOptions& o) { o.settings.set("norm", "eps", double(INFINITY)); }, "norm.eps must be a finite number in (0, 1], got inf"},
      {[](ClassifierOptions& o) { o.pad_id = 10; }, "pad_id = 10 is outside the vocabulary [0, 10)"},
      {[](ClassifierOptions& o) { o.pad_id = -2; }, "pad_id = -2"},
      {[](ClassifierOptions& o) {
         o.vocab_size = o.d_model = o.d_ff = kMaxClassifierSize;
         o.n_heads = 1;
         o.n_layers = kMaxClassifierLayers;
       },
       "the options make more than 2^63 - 1 parameters"},
  };
  for (const auto& [edit, message] : cases) {
    ClassifierOptions o = names_config();
    edit(o);
    INFO(message);
    CHECK_THROWS_WITH(validate(o, "config.json"), Catch::Contains("config.json: " + message));
    CHECK_THROWS_AS(parameter_count(o), ValueError);
    // The constructor refuses before allocating anything, even for the sizes no machine holds.
    CHECK_THROWS_WITH(make_classifier(o), Catch::Contains("SequenceClassifier: " + message));
  }
  CHECK_NOTHROW(validate(names_config()));
}

namespace {

/// A (B, T) padding mask whose row b has lengths[b] leading tokens and pads after.
Tensor trailing_pads(const std::vector<int64_t>& lengths, int64_t T) {
  std::vector<int> pads;
  for (int64_t n : lengths)
    for (int64_t t = 0; t < T; ++t) pads.push_back(t >= n);
  return mask(pads, {static_cast<int64_t>(lengths.size()), T});
}

}  // namespace

TEST_CASE("nn: length_groups puts rows of like lengths together, longest first, and only where it pays") {
  LengthGroups groups;
  // Lengths 160, 40, 150, 100, 30 of T 160: {0, 2} cut to 160, {3} to 100 (< 3/4 of 160), {1, 4} to 40
  // (30 is 3/4 of 40); 500 positions of 800.
  length_groups(trailing_pads({160, 40, 150, 100, 30}, 160), groups);
  CHECK(groups.rows == std::vector<int64_t>{0, 2, 3, 1, 4});
  CHECK(groups.starts == std::vector<int64_t>{0, 2, 3, 5});
  CHECK(groups.lengths == std::vector<int64_t>{160, 100, 40});
  // A row's length ends at its last token, pads inside it included; a row of pads only has length 1.
  std::vector<int> pads(3 * 128, 0);
  for (int t = 10; t < 128; ++t) pads[128 + t] = t != 50;  // row 1: tokens 0..9 and 50
  for (int t = 0; t < 128; ++t) pads[256 + t] = 1;          // row 2: all pads
  length_groups(mask(pads, {3, 128}), groups);
  CHECK(groups.rows == std::vector<int64_t>{0, 1, 2});
  CHECK(groups.lengths == std::vector<int64_t>{128, 51, 1});
  // Runs whole: T under kLengthGroupsFromPositions, or less than 1/8 of the positions saved.
  length_groups(trailing_pads({127, 20}, 127), groups);
  CHECK(groups.size() == 0);
  length_groups(trailing_pads({200, 200, 200, 150}, 200), groups);  // 50 of 800 saved
  CHECK(groups.size() == 0);
  CHECK(groups.rows.empty());
}

TEST_CASE("nn: a padded batch of long sequences runs in length groups, with the whole batch's logits and gradients") {
  for (std::string pool : {"mean", "cls"}) {
    ClassifierOptions options = names_config();
    options.context_length = 160;
    options.pool = pool;
    SequenceClassifier model = make_classifier(options, 3);
    model.to(DType::float64);
    INFO(pool);
    // Rows out of length order: the groups' logits go back to the batch's order.
    const std::vector<int64_t> lengths = {40, 160, 100, 150, 30};
    const Tensor pads = trailing_pads(lengths, 160);
    std::vector<int64_t> tokens;
    for (int64_t b = 0; b < 5; ++b)
      for (int64_t t = 0; t < 160; ++t) tokens.push_back(t < lengths[b] ? 1 + (7 * b + 3 * t) % 9 : 0);
    const Tensor token_ids = ids(tokens, {5, 160});
    LengthGroups groups;
    length_groups(pads, groups);
    REQUIRE(groups.size() == 3);
    const Tensor weights = tensor({0.3, -1.1, 0.7, 2.0, -0.4, 0.9, 1.3, -0.2, 0.5, -0.8, 0.1, 1.7, -1.5, 0.6, 0.2},
                                  {5, 3}, DType::float64);
    auto run = [&](bool grouped) {
      model.zero_grad();
      const Tensor logits = grouped ? model.forward(token_ids, pads)
                                    : model.head().forward(model.pool(model.encode(token_ids, pads), pads));
      backward(sum(logits * weights));
      std::vector<Tensor> out{logits.detach()};
      for (const auto& [name, p] : model.named_parameters()) out.push_back(p.grad().defined() ? p.grad() : zeros_like(p));
      return out;
    };
    const std::vector<Tensor> grouped = run(true), whole = run(false);
    REQUIRE(grouped.size() == whole.size());
    for (size_t i = 0; i < grouped.size(); ++i) CHECK(max_abs_diff(grouped[i], whole[i]) < 1e-12);
    CHECK(max_abs_diff(whole[0], zeros_like(whole[0])) > 0.1);  // the logits are not trivially equal
  }
}
