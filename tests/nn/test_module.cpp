// Module: hierarchical names, counting, train/eval, zero_grad, the state dictionary and dtype conversion,
// on a small composite model defined here the way a user adds a layer: one class that registers its
// parameters and children by name. Also runs every registered layer gradcheck ("nn/...").
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/layernorm.h"
#include "nn/linear.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {

/// A residual block with its own parameter: norm(x + drop(proj(x))) ⊙ gate.   x: (..., C) -> (..., C)
class Block : public Module {
 public:
  Block(int64_t dim, Generator& gen, std::shared_ptr<Generator> rng)
      : proj_(&register_module("proj", std::make_unique<Linear>(dim, dim, true, gen))),
        drop_(&register_module("drop", std::make_unique<Dropout>(0.5, std::move(rng)))),
        norm_(&register_module("norm", std::make_unique<LayerNorm>(dim))) {
    gate = register_parameter("gate", ones({dim}));
  }
  Tensor forward(const Tensor& x) const { return norm_->forward(x + drop_->forward(proj_->forward(x))) * gate; }
  Tensor gate;

 private:
  Linear* proj_;
  Dropout* drop_;
  LayerNorm* norm_;
};

/// Blocks named "0", "1", ... as PyTorch's ModuleList names them.
class Blocks : public Module {
 public:
  Blocks(int n, int64_t dim, Generator& gen, const std::shared_ptr<Generator>& rng) {
    for (int i = 0; i < n; ++i)
      blocks_.push_back(&register_module(std::to_string(i), std::make_unique<Block>(dim, gen, rng)));
  }
  Tensor forward(Tensor x) const {
    for (const Block* block : blocks_) x = block->forward(x);
    return x;
  }

 private:
  std::vector<Block*> blocks_;
};

/// ids (B, T) -> logits (B, T, 2).
class Net : public Module {
 public:
  explicit Net(uint64_t seed, int n_blocks = 2) : rng_(std::make_shared<Generator>(seed + 1)) {
    Generator gen(seed);
    embed_ = &register_module("embed", std::make_unique<Embedding>(10, 4, gen));
    layers_ = &register_module("layers", std::make_unique<Blocks>(n_blocks, 4, gen, rng_));
    head_ = &register_module("head", std::make_unique<Linear>(4, 2, true, gen));
  }
  Tensor forward(const Tensor& token_ids) const { return head_->forward(layers_->forward(embed_->forward(token_ids))); }

 private:
  std::shared_ptr<Generator> rng_;
  Embedding* embed_;
  Blocks* layers_;
  Linear* head_;
};

/// ids (B, T) -> logits (B, T, 10) through a head that reads the embedding's table (tied weights, as a
/// language model's): embed.weight and head.weight are one [10, 4] tensor; the head has a bias of its own.
class TiedNet : public Module {
 public:
  explicit TiedNet(uint64_t seed) : rng_(std::make_shared<Generator>(seed + 1)) {
    Generator gen(seed);
    embed_ = &register_module("embed", std::make_unique<Embedding>(10, 4, gen));
    layers_ = &register_module("layers", std::make_unique<Blocks>(1, 4, gen, rng_));
    head_ = &register_module("head", std::make_unique<Linear>(embed_->weight, true, gen));
  }
  Tensor forward(const Tensor& token_ids) const { return head_->forward(layers_->forward(embed_->forward(token_ids))); }
  const Embedding& embed() const { return *embed_; }
  const Linear& head() const { return *head_; }

 private:
  std::shared_ptr<Generator> rng_;
  Embedding* embed_;
  Blocks* layers_;
  Linear* head_;
};

const Tensor kIds = ids({1, 4, 7, 2, 9, 0}, {2, 3});

std::vector<std::string> names_of(const NamedTensors& named) {
  std::vector<std::string> names;
  for (const auto& [name, _] : named) names.push_back(name);
  return names;
}

/// A deep copy of every parameter's values.
NamedTensors snapshot(const Module& m) {
  NamedTensors copy;
  for (const auto& [name, t] : m.named_parameters()) copy.emplace_back(name, t.detach().clone());
  return copy;
}

bool same_values(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || !(a[i].second.shape() == b[i].second.shape()) ||
        max_abs_diff(a[i].second, b[i].second) != 0)
      return false;
  return true;
}

void for_each_module(const Module& m, const std::function<void(const Module&)>& fn) {
  fn(m);
  for (const auto& [_, child] : m.children()) for_each_module(*child, fn);
}

}  // namespace

TEST_CASE("nn: a composite module names its parameters hierarchically and depth first in registration order") {
  Net net(1);
  const NamedTensors params = net.named_parameters();
  CHECK(names_of(params) == std::vector<std::string>{"embed.weight", "layers.0.gate", "layers.0.proj.weight",
                                                     "layers.0.proj.bias", "layers.0.norm.weight", "layers.0.norm.bias",
                                                     "layers.1.gate", "layers.1.proj.weight", "layers.1.proj.bias",
                                                     "layers.1.norm.weight", "layers.1.norm.bias", "head.weight",
                                                     "head.bias"});
  CHECK(params[0].second.shape() == Shape{10, 4});
  CHECK(params[2].second.shape() == Shape{4, 4});
  CHECK(params[11].second.shape() == Shape{2, 4});
  for (const auto& [name, t] : params) {
    INFO(name);
    CHECK(t.requires_grad());
    CHECK(t.is_leaf());
  }
  // The public handles are the registered tensors themselves.
  Generator gen(0);
  Linear lin(3, 2, true, gen);
  CHECK(lin.named_parameters()[0].second.same(lin.weight));
  CHECK(lin.named_parameters()[1].second.same(lin.bias));
  CHECK(names_of(net.children().at(1).second->named_parameters())[0] == "0.gate");
}

TEST_CASE("nn: parameter_count sums the elements of every parameter") {
  // embed 10·4 + 2 blocks · (gate 4 + proj 16 + 4 + norm 4 + 4) + head 2·4 + 2
  CHECK(Net(1).parameter_count() == 40 + 2 * 32 + 10);
  CHECK(Net(1).parameters().size() == 13);
  Generator gen(0);
  CHECK(Linear(768, 768, true, gen).parameter_count() == 768 * 768 + 768);
  CHECK(Linear(768, 768, false, gen).parameter_count() == 768 * 768);
}

TEST_CASE("nn: train and eval reach every descendant") {
  Net net(2);
  int modules = 0;
  for_each_module(net, [&](const Module& m) {
    ++modules;
    CHECK(m.is_training());
  });
  CHECK(modules == 1 + 1 + 1 + 2 * 4 + 1);  // net, embed, layers, 2 × (block, proj, drop, norm), head
  net.eval();
  for_each_module(net, [](const Module& m) { CHECK_FALSE(m.is_training()); });
  // Evaluation is deterministic (dropout off); training draws new masks each call.
  CHECK(max_abs_diff(net.forward(kIds), net.forward(kIds)) == 0);
  net.train();
  for_each_module(net, [](const Module& m) { CHECK(m.is_training()); });
  CHECK(max_abs_diff(net.forward(kIds), net.forward(kIds)) > 0);
}

TEST_CASE("nn: zero_grad drops the gradient of every parameter") {
  Net net(3);
  net.eval();
  Generator gen(9);
  net.forward(kIds).backward(randn({2, 3, 2}, gen));
  for (const auto& [name, t] : net.named_parameters()) {
    INFO(name);
    CHECK(t.grad().defined());
  }
  net.zero_grad();
  for (const auto& [name, t] : net.named_parameters()) {
    INFO(name);
    CHECK_FALSE(t.grad().defined());
  }
}

TEST_CASE("nn: a state dictionary round trip reproduces the model") {
  Net source(4), target(5);
  source.eval();
  target.eval();
  CHECK(max_abs_diff(source.forward(kIds), target.forward(kIds)) > 0);
  target.load_state_dict(source.state_dict());
  CHECK(same_values(snapshot(target), snapshot(source)));
  CHECK(max_abs_diff(source.forward(kIds), target.forward(kIds)) == 0);
  // Loading copies values: the two models do not share storage afterwards.
  {
    NoGradGuard no_grad;
    Tensor(source.named_parameters()[0].second).fill_(3);
  }
  CHECK(target.named_parameters()[0].second.at({0, 0}) != 3);
  // The state dictionary shares storage with the module (as PyTorch's does).
  CHECK(source.state_dict()[0].second.at({1, 2}) == 3);
}

TEST_CASE("nn: load_state_dict refuses missing or unexpected or wrongly shaped entries and changes nothing") {
  Net net(6);
  const NamedTensors before = snapshot(net);
  // Valid values from another model first, so that a load that wrote before checking would show.
  const NamedTensors good = snapshot(Net(7));

  SECTION("missing") {
    NamedTensors state = good;
    state.erase(state.begin() + 3);  // layers.0.proj.bias
    try {
      net.load_state_dict(state);
      FAIL("no error");
    } catch (const ValueError& e) {
      const std::string message = e.what();
      CHECK(message.find("missing") != std::string::npos);
      CHECK(message.find("'layers.0.proj.bias'") != std::string::npos);
    }
  }
  SECTION("unexpected") {
    NamedTensors state = good;
    state.emplace_back("head.scale", zeros({2}));
    try {
      net.load_state_dict(state);
      FAIL("no error");
    } catch (const ValueError& e) {
      const std::string message = e.what();
      CHECK(message.find("unexpected") != std::string::npos);
      CHECK(message.find("'head.scale'") != std::string::npos);
    }
  }
  SECTION("wrong shape") {
    NamedTensors state = good;
    state.back().second = zeros({3});  // head.bias is [2]
    try {
      net.load_state_dict(state);
      FAIL("no error");
    } catch (const ShapeError& e) {
      const std::string message = e.what();
      CHECK(message.find("'head.bias'") != std::string::npos);
      CHECK(message.find("[3]") != std::string::npos);
      CHECK(message.find("[2]") != std::string::npos);
    }
  }
  CHECK(same_values(snapshot(net), before));
}

TEST_CASE("nn: load_state_dict names every problem in one message, widens float32 and refuses float64 into float32") {
  Net net(6);
  const NamedTensors before = snapshot(net);
  NamedTensors state = snapshot(Net(7));
  state.erase(state.begin());                                 // embed.weight
  state.back().second = zeros({3});                           // head.bias is [2]
  state[state.size() - 2].second = zeros({2, 4}, DType::int64);  // head.weight, right shape, not a float
  state.emplace_back("extra", zeros({5}));
  try {
    net.load_state_dict(state);
    FAIL("no error");
  } catch (const ValueError& e) {
    CHECK(std::string(e.what()) ==
          "load_state_dict: 1 missing ('embed.weight' [10,4]), 1 unexpected ('extra' [5]), 1 wrongly shaped "
          "('head.bias': given [3], expected [2]), 1 of the wrong dtype ('head.weight' is int64, not a float)");
  }
  NamedTensors wide = snapshot(Net(7));
  wide[1].second = wide[1].second.to(DType::float64);
  CHECK_THROWS_AS(net.load_state_dict(wide), DTypeError);
  CHECK_THROWS_WITH(net.load_state_dict(wide), Catch::Contains("narrowing would lose precision"));
  CHECK(same_values(snapshot(net), before));

  // A float32 state into a float64 module: every value arrives exactly.
  const NamedTensors narrow = snapshot(Net(7));
  net.to(DType::float64);
  net.load_state_dict(narrow);
  for (size_t i = 0; i < narrow.size(); ++i) {
    INFO(narrow[i].first);
    CHECK(net.named_parameters()[i].second.dtype() == DType::float64);
    CHECK(max_abs_diff(net.named_parameters()[i].second, narrow[i].second.to(DType::float64)) == 0);
  }
}

TEST_CASE("nn: to(float64) converts every parameter in place and keeps the values") {
  Net net(8);
  net.eval();
  const NamedTensors before = snapshot(net);
  const Tensor y32 = net.forward(kIds);
  net.to(DType::float64);
  const NamedTensors after = net.named_parameters();
  for (size_t i = 0; i < after.size(); ++i) {
    INFO(after[i].first);
    CHECK(after[i].second.dtype() == DType::float64);
    CHECK(after[i].second.requires_grad());
    CHECK(max_abs_diff(after[i].second, before[i].second.to(DType::float64)) == 0);
  }
  const Tensor y64 = net.forward(kIds);
  CHECK(y64.dtype() == DType::float64);
  CHECK(max_abs_diff(y64, y32.to(DType::float64)) < 1e-5);
  // A layer's public handles see the conversion too.
  Generator gen(0);
  Linear lin(3, 2, true, gen);
  lin.to(DType::float64);
  CHECK(lin.weight.dtype() == DType::float64);
  CHECK(lin.bias.dtype() == DType::float64);
}

TEST_CASE("nn: a moved module keeps working") {
  Net net(9);
  net.eval();
  const Tensor expected = net.forward(kIds);
  Net moved(std::move(net));
  CHECK(max_abs_diff(moved.forward(kIds), expected) == 0);
  CHECK(moved.parameter_count() == 114);
}

TEST_CASE("nn: a shared parameter is listed once by named_parameters and under every name by state_dict") {
  const TiedNet net(3);
  const std::vector<std::string> parameters = {"embed.weight", "layers.0.gate", "layers.0.proj.weight",
                                               "layers.0.proj.bias", "layers.0.norm.weight", "layers.0.norm.bias",
                                               "head.bias"};
  CHECK(names_of(net.named_parameters()) == parameters);
  std::vector<std::string> state = parameters;
  state.insert(state.end() - 1, "head.weight");  // PyTorch's order: the head's own names, weight first
  CHECK(names_of(net.state_dict()) == state);
  CHECK(net.parameters().size() == parameters.size());
  CHECK(net.parameter_count() == 40 + 4 + 16 + 4 + 4 + 4 + 10);  // the [10, 4] table once
  // One tensor, not two equal ones: the same TensorImpl behind both names and both layers' handles.
  CHECK(&net.head().weight.impl() == &net.embed().weight.impl());
  const NamedTensors dict = net.state_dict();
  CHECK(&dict[6].second.impl() == &dict[0].second.impl());
  CHECK(net.head().in_features() == 4);
  CHECK(net.head().out_features() == 10);
  // The head draws no weight of its own: the table keeps the embedding's N(0, 1) values.
  Generator gen(3);
  const Embedding alone(10, 4, gen);
  CHECK(max_abs_diff(net.embed().weight, alone.weight) == 0);
}

TEST_CASE("nn: a shared parameter's gradient sums both uses, and zero_grad and to(float64) keep it shared") {
  TiedNet net(4);
  net.eval();
  Generator gen(9);
  const Tensor r = randn({2, 3, 10}, gen);
  sum(net.forward(kIds) * r).backward();
  const Tensor dW = net.embed().weight.grad();
  REQUIRE(dW.defined());
  // One gradient behind both handles (that it is the sum of both uses: tests/nn/test_language_model.cpp).
  CHECK(max_abs_diff(net.head().weight.grad(), dW) == 0);
  net.zero_grad();
  CHECK_FALSE(net.embed().weight.grad().defined());
  net.to(DType::float64);
  CHECK(net.head().weight.dtype() == DType::float64);
  CHECK(&net.head().weight.impl() == &net.embed().weight.impl());
  CHECK(net.named_parameters().size() == 7);
}

TEST_CASE("nn: load_state_dict fills a shared parameter from both names, which must agree, and keeps it shared") {
  TiedNet net(5);
  const TiedNet other(6);
  net.load_state_dict(other.state_dict());
  CHECK(same_values(snapshot(net), snapshot(other)));
  // Still one tensor after the load: a change through one name shows through the other.
  {
    NoGradGuard no_grad;
    Tensor(net.embed().weight).fill_(0.25);
  }
  CHECK(net.head().weight.at({3, 1}) == 0.25);
  CHECK(net.state_dict()[6].second.at({9, 3}) == 0.25);

  const NamedTensors before = snapshot(net);
  SECTION("both names are expected, as by PyTorch's strict load") {
    try {
      net.load_state_dict(snapshot(other));  // named_parameters(): the table under embed.weight only
      FAIL("no error");
    } catch (const ValueError& e) {
      CHECK(std::string(e.what()) == "load_state_dict: 1 missing ('head.weight' [10,4])");
    }
  }
  SECTION("two entries for one tensor that differ are refused, naming both, rather than one silently kept") {
    NamedTensors state = other.state_dict();
    std::vector<double> values(40, 0.5);
    state[6].second = tensor(values, {10, 4});  // head.weight
    values[5] = 0.75;
    state[0].second = tensor(values, {10, 4});  // embed.weight, but for one element
    try {
      net.load_state_dict(state);
      FAIL("no error");
    } catch (const ValueError& e) {
      CHECK(std::string(e.what()) ==
            "load_state_dict: 1 shared but different ('embed.weight' and 'head.weight' are one tensor: element 5 "
            "is 0.75 and 0.5)");
    }
  }
  CHECK(same_values(snapshot(net), before));
}

TEST_CASE("nn: a shared parameter must be a registered one") {
  Generator gen(0);
  CHECK_THROWS_WITH(
      Linear(zeros({3, 2}), false, gen),
      "register_shared_parameter: 'weight' must share a registered parameter (a leaf that requires grad)");
  CHECK_THROWS_AS(Linear(zeros({3}).requires_grad_(), false, gen), ShapeError);
  CHECK_THROWS_WITH(Linear(Tensor(), false, gen),
                    "Linear: a shared weight must be [out, in] with positive sizes, got an undefined tensor");
  const Tensor shared = zeros({3, 2}).requires_grad_();
  const Linear layer(shared, true, gen);
  CHECK(layer.bias.shape() == Shape({3}));
  CHECK(layer.weight.impl_ptr() == shared.impl_ptr());
}

TEST_CASE("nn: every registered layer gradcheck passes") {
  int checked = 0;
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (c.name.rfind("nn/", 0) != 0) continue;
    ++checked;
    const GradcheckResult result = c.run(GradcheckOptions::float64());
    INFO(c.name << "\n" << result.str());
    // gradcheck's own criterion, |a - n| <= atol + rtol·|n|, decides; a bound on the relative error alone
    // would fail on elements whose gradient is ~1e-5, where 1e-9 of rounding is a large relative error.
    CHECK(result.passed);
    CHECK_FALSE(result.inputs.empty());
  }
  CHECK(checked >= 10);  // linear 3, embedding 2, positions 1, layernorm 1, dropout 1, feed_forward 2
}

TEST_CASE("nn: the registered layer gradchecks also pass in float32 with the documented tolerances") {
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (c.name.rfind("nn/", 0) != 0) continue;
    const GradcheckResult result = c.run(GradcheckOptions::float32());
    INFO(c.name << "\n" << result.str());
    CHECK(result.passed);
  }
}
