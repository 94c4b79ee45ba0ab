// Anomaly detection inside a real model: each module names itself while its forward runs, so a message
// gives the place of the op in the model as the parameter names do ("encoder.layers.1.self_attn").
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "support/anomaly.h"
#include "nn/classifier.h"

using namespace tapegrad;
using testing::anomaly_message;
using namespace tapegrad::nn;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;

namespace {

/// A small float32 classifier: vocab 10, d_model 8, 2 heads, d_ff 16, 2 layers, a final norm, no dropout.
SequenceClassifier make_model() {
  ClassifierOptions o{10};
  o.d_model = 8;
  o.n_heads = 2;
  o.d_ff = 16;
  o.n_layers = 2;
  o.context_length = 12;
  o.dropout = 0;
  o.final_norm = true;
  Generator init(3);
  return SequenceClassifier(o, init, nullptr);
}

const Tensor kIds = ids({3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, {2, 5});

/// Sets element `index` of the named parameter (flat, row-major) to value, or every element when index < 0.
void set_parameter(const Module& model, const std::string& name, int64_t index, double value) {
  for (auto& [n, t] : model.named_parameters()) {
    if (n != name) continue;
    std::vector<double> values = t.to_vector();
    for (size_t i = 0; i < values.size(); ++i)
      if (index < 0 || static_cast<int64_t>(i) == index) values[i] = value;
    NoGradGuard no_grad;
    Tensor(t).copy_(tensor(values, t.shape(), t.dtype()));
    return;
  }
  FAIL("no parameter " << name);
}

}  // namespace

TEST_CASE("anomaly scopes: a module knows the name it was registered under, a root has none") {
  const SequenceClassifier model = make_model();
  CHECK(model.name().empty());
  CHECK(model.encoder().layer(1).name() == "1");
  std::set<std::string> children;
  for (const auto& [name, child] : model.children()) {
    CHECK(child->name() == name);
    children.insert(name);
  }
  CHECK(children == std::set<std::string>{"embed", "pos_embed", "dropout", "encoder", "pool", "head"});
}

TEST_CASE("anomaly scopes: every op that reads a parameter ran in the scope of that parameter's module") {
  const SequenceClassifier model = make_model();
  std::map<const AutogradMeta*, std::string> module_of;  // parameter -> the module path its name starts with
  for (const auto& [name, t] : model.named_parameters()) module_of[t.impl().autograd.get()] = name.substr(0, name.rfind('.'));
  Tape::current().clear();
  DetectAnomalyGuard detect;
  const Tensor logits = model.forward(kIds);
  std::set<std::string> seen;
  for (size_t i = 0; i < Tape::current().size(); ++i) {
    const Node& node = Tape::current().entry(i);
    REQUIRE(node.scope != nullptr);
    for (const Edge& edge : node.inputs) {
      auto it = module_of.find(edge.meta.get());
      if (it == module_of.end()) continue;
      INFO("#" << i << ' ' << node.name());
      CHECK(*node.scope == it->second);
      seen.insert(it->second);
    }
  }
  std::set<std::string> all;
  for (const auto& [_, path] : module_of) all.insert(path);
  CHECK(seen == all);  // every module with parameters was seen, encoder.norm and pos_embed included
  CHECK(seen.count("encoder.layers.1.self_attn.out_proj"));
  Tape::current().clear();
}

TEST_CASE("anomaly scopes: a NaN weight is named at the op that reads it, with the module path") {
  const SequenceClassifier model = make_model();
  set_parameter(model, "encoder.layers.1.self_attn.in_proj_weight", 3 * 8 + 2, std::nan(""));  // row 3, col 2
  Tape::current().clear();
  {
    DetectAnomalyGuard detect;
    CHECK(anomaly_message([&] { model.forward(kIds); }) ==
          "anomaly: forward of matmul_bias produced NaN (element [0,0,3] of output [2,5,24]); "
          "inputs [2,5,8], [24,8], [24] (input 1 already holds NaN); in encoder.layers.1.self_attn");
    CHECK(current_scope().empty());
  }
  Tape::current().clear();
  // Off: the same forward runs through and the NaN reaches the logits.
  Tensor logits;
  REQUIRE_NOTHROW(logits = model.forward(kIds));
  CHECK(std::isnan(logits.to_vector()[0]));
  Tape::current().clear();
}

TEST_CASE("anomaly scopes: an overflow to Inf names the layer's linear2 and the shapes") {
  const SequenceClassifier model = make_model();
  set_parameter(model, "encoder.layers.0.linear2.weight", -1, std::numeric_limits<float>::max());
  Tape::current().clear();
  DetectAnomalyGuard detect;
  const std::string message = anomaly_message([&] { model.forward(kIds); });
  CHECK_THAT(message, StartsWith("anomaly: forward of matmul_bias produced Inf (element ") &&
                          Contains("of output [2,5,8]); inputs [2,5,16], [8,16], [8]; ") &&
                          EndsWith("; in encoder.layers.0.linear2"));
  Tape::current().clear();
}

TEST_CASE("anomaly scopes: a backward anomaly names the module its op ran in, recorded at the forward") {
  // With a zero head the logits are 0, so logits · float max is a finite loss; its gradient float max then
  // reaches the head, whose weight and bias gradients sum it over the batch of 2 and overflow to Inf.
  const SequenceClassifier model = make_model();
  set_parameter(model, "head.weight", -1, 0);
  set_parameter(model, "head.bias", -1, 0);
  DetectAnomalyGuard detect;
  const Tensor loss = sum(model.forward(kIds) * static_cast<double>(std::numeric_limits<float>::max()));
  REQUIRE(loss.item() == 0);
  const std::string message = anomaly_message([&] { backward(loss); });
  CHECK_THAT(message, StartsWith("anomaly: backward of matmul_bias produced Inf in the gradient of input ") &&
                          EndsWith("; in head"));
  CHECK(Tape::current().size() == 0);
}
