// The user's tests of the RMSNorm op and layer: its gradient checks, its node kind covered by a check, the
// fused op against its composition from tapegrad's primitives, numbers worked by hand, and the component
// checks every registered variant must pass.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/classifier.h"
#include "nn/component_checks.h"
#include "rmsnorm.h"

using namespace tapegrad;

TEST_CASE("rms_norm: every gradcheck case of ours passes in float64 and float32") {
  int ran = 0;
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (c.name.rfind("custom/", 0) != 0) continue;
    ++ran;
    for (const GradcheckOptions& options : {GradcheckOptions::float64(), GradcheckOptions::float32()}) {
      const GradcheckResult result = c.run(options);
      INFO(c.name << " " << dtype_name(options.dtype) << "\n" << result.str());
      CHECK(result.passed);
    }
  }
  CHECK(ran == 3);
}

TEST_CASE("rms_norm: every node kind of ours is recorded by a gradcheck case") {
  std::vector<std::string> ours_unchecked;
  for (const std::string& kind : node_kinds_without_case())
    if (kind.rfind("custom.", 0) == 0) ours_unchecked.push_back(kind);
  CHECK(ours_unchecked.empty());
}

TEST_CASE("rms_norm: equals x * (mean(x^2) + eps)^(-1/2) * w, values and gradients") {
  Generator gen(7);
  const Tensor x = randn({3, 4, 6}, gen, DType::float64).requires_grad_();
  const Tensor w = randn({6}, gen, DType::float64).requires_grad_();
  const Tensor r = randn({3, 4, 6}, gen, DType::float64);
  // Each on a tape of its own: backward releases the tape it walks.
  const Tensor fused = custom::rms_norm(x, w, 1e-5);
  const std::vector<double> y_fused = fused.to_vector();
  backward(sum(fused * r));
  const std::vector<double> dx = x.grad().to_vector(), dw = w.grad().to_vector();
  x.zero_grad();
  w.zero_grad();
  const Tensor composed = x * pow(mean(x * x, -1, true) + 1e-5, -0.5) * w;
  const std::vector<double> y_composed = composed.to_vector();
  backward(sum(composed * r));
  for (size_t i = 0; i < y_fused.size(); ++i) CHECK(y_fused[i] == Approx(y_composed[i]).margin(1e-14));
  const std::vector<double> dx_composed = x.grad().to_vector(), dw_composed = w.grad().to_vector();
  for (size_t i = 0; i < dx.size(); ++i) CHECK(dx[i] == Approx(dx_composed[i]).margin(1e-13));
  for (size_t i = 0; i < dw.size(); ++i) CHECK(dw[i] == Approx(dw_composed[i]).margin(1e-13));
}

TEST_CASE("rms_norm: numbers worked by hand") {
  // x = (3, 4): mean(x²) = 12.5, r = 1/√12.5; y = (3r, 4r) ⊙ (1, 2)
  const Tensor y = custom::rms_norm(tensor({3.0, 4.0}, DType::float64), tensor({1.0, 2.0}, DType::float64), 0);
  CHECK(y.to_vector()[0] == Approx(3 / std::sqrt(12.5)).epsilon(1e-15));
  CHECK(y.to_vector()[1] == Approx(8 / std::sqrt(12.5)).epsilon(1e-15));
  CHECK_THROWS_AS(custom::rms_norm(tensor({1.0, 2.0}), tensor({1.0}), 1e-5), ShapeError);
}

TEST_CASE("rmsnorm: the registered component builds into the classifier and passes the component checks") {
  nn::ClassifierOptions options;
  options.vocab_size = 9;
  options.d_model = 8;
  options.n_heads = 2;
  options.d_ff = 16;
  options.num_classes = 3;
  options.context_length = 5;
  options.norm = "rmsnorm";
  options.dropout = 0;
  Generator init(1);
  const nn::SequenceClassifier model(options, init, nullptr);
  std::vector<std::string> norms;
  for (const auto& [name, t] : model.named_parameters())
    if (name.find("norm") != std::string::npos) norms.push_back(name);
  CHECK(norms == std::vector<std::string>{"encoder.layers.0.norm1.weight", "encoder.layers.0.norm2.weight",
                                          "encoder.layers.1.norm1.weight", "encoder.layers.1.norm2.weight"});
  std::string problems;
  for (const std::string& problem : nn::component_problems()) problems += problem + "\n";
  CHECK(problems == "");
}

TEST_CASE("rmsnorm: its setting eps reaches every norm of the model, and validate checks it by its declaration") {
  nn::ClassifierOptions o = nn::micro_classifier();
  o.norm = "rmsnorm";
  o.final_norm = true;
  const auto eps_of_every_norm = [](const nn::ClassifierOptions& options) {
    Generator init(3);
    const nn::SequenceClassifier model(options, init, nullptr);
    std::vector<double> eps;
    for (size_t i = 0; i < model.encoder().n_layers(); ++i)
      for (const nn::Norm* norm : {&model.encoder().layer(i).norm1(), &model.encoder().layer(i).norm2()})
        eps.push_back(dynamic_cast<const custom::RMSNorm&>(*norm).eps());
    eps.push_back(dynamic_cast<const custom::RMSNorm&>(*model.encoder().norm()).eps());
    return eps;
  };
  CHECK(eps_of_every_norm(o) == std::vector<double>(5, 1e-5));  // the declared default
  o.settings.set("norm", "eps", 1e-3);
  CHECK(eps_of_every_norm(o) == std::vector<double>(5, 1e-3));
  o.settings.set("norm", "eps", 0.0);
  CHECK_THROWS_WITH(nn::validate(o), Catch::Contains("norm.eps must be a finite number in (0, 1], got 0"));
  // One declaration, shared with layernorm's: one flag for both.
  CHECK(nn::setting_flag("norm.eps") == "--norm-eps");
}
