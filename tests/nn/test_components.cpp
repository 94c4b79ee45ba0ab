// Named components (nn/components.h): registering, looking up, refusing; a variant registered from outside
// the library (here, from this test) is used by the classifier exactly as a built-in one; every registered
// variant passes component_problems() (its parameter count, its gradient checks, finite logits).
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/classifier.h"
#include "nn/component_checks.h"
#include "nn/components.h"
#include "nn/layernorm.h"
#include "nn/module_gradcheck.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {

// A norm defined outside the library: LayerNorm without the mean (no bias), i.e. RMS-free "scale only".
// It is deliberately simple; examples/custom_layer has the real RMSNorm with a hand-derived backward.
class ScaleNorm : public Norm {
 public:
  explicit ScaleNorm(int64_t dim) { gain = register_parameter("gain", ones({dim})); }
  Tensor forward(const Tensor& x) const override { return x * gain; }
  Tensor gain;
};

// A norm whose parameter_count lies (one too few), so that component_problems() must name it.
class MiscountedNorm : public Norm {
 public:
  explicit MiscountedNorm(int64_t dim) { gain = register_parameter("gain", ones({dim})); }
  Tensor forward(const Tensor& x) const override { return x * gain; }
  Tensor gain;
};

// One initialiser runs every registration of this file when the program loads.
const bool registered = [] {
  register_component<NormKind>({.name = "test-scale",
                                .help = "x ⊙ gain (a test's own norm)",
                                .make = [](int64_t dim, const VariantSettings&, Generator&) -> std::unique_ptr<Norm> {
                                  return std::make_unique<ScaleNorm>(dim);
                                },
                                .parameter_count = [](int64_t dim, const VariantSettings&) { return dim; }});
  register_gradchecks({module_case<ScaleNorm>(
      "test/scale_norm", [](Generator&) { return std::make_unique<ScaleNorm>(3); }, {{"x", {2, 3}}},
      [](const ScaleNorm& norm, const std::vector<Tensor>& in) { return norm.forward(in[0]); })});
  return true;
}();

ClassifierOptions small() {
  ClassifierOptions o;
  o.vocab_size = 9;
  o.d_model = 8;
  o.n_heads = 2;
  o.d_ff = 12;
  o.n_layers = 2;
  o.context_length = 6;
  o.num_classes = 3;
  o.dropout = 0;
  return o;
}

}  // namespace

TEST_CASE("components: the built-in variants are registered under their names") {
  // Across files the registration order is the link order (nn/alibi.cpp before nn/positions.cpp): sorted.
  std::vector<std::string> positional = component_names<PositionalKind>();
  std::sort(positional.begin(), positional.end());
  CHECK(positional == std::vector<std::string>{"alibi", "learned", "rope", "sinusoidal"});
  CHECK(component_names<AttentionKind>() == std::vector<std::string>{"softmax", "linear"});
  CHECK(component_names<FeedForwardKind>() == std::vector<std::string>{"dense", "moe"});
  CHECK(component_names<PoolKind>() == std::vector<std::string>{"mean", "cls"});
  CHECK(component_names<ActivationKind>() == std::vector<std::string>{"relu", "gelu"});
  CHECK(component_names<NormKind>() == std::vector<std::string>{"layernorm", "test-scale"});  // built-in first
  CHECK(component<PoolKind>("cls").prepends_cls);
  CHECK_FALSE(component<PoolKind>("mean").prepends_cls);
}

TEST_CASE("components: an unknown name, a second registration or an incomplete one is a ValueError") {
  CHECK_THROWS_WITH(component<NormKind>("rmsnorm"),
                    Catch::Matchers::Equals("unknown norm 'rmsnorm' (registered: layernorm or test-scale)"));
  NormKind::Entry again = component<NormKind>("layernorm");
  CHECK_THROWS_WITH(register_component<NormKind>(again),
                    Catch::Matchers::Equals("register_component: norm 'layernorm' is registered twice"));
  CHECK_THROWS_WITH(register_component<NormKind>({.name = "no-count", .make = again.make}),
                    Catch::Matchers::Equals("register_component: norm 'no-count' lacks make or parameter_count"));
  CHECK_THROWS_WITH(register_component<ActivationKind>({.name = "no-apply"}),
                    Catch::Matchers::Equals("register_component: activation 'no-apply' lacks apply"));
  CHECK_THROWS_AS(register_component<PoolKind>({}), ValueError);
  CHECK(component_names<NormKind>().size() == 2);  // nothing was added by the refused calls
}

TEST_CASE("components: a variant registered outside the library builds into the classifier by name") {
  ClassifierOptions options = small();
  options.norm = "test-scale";
  options.final_norm = true;
  Generator init(5);
  const SequenceClassifier model(options, init, nullptr);
  std::vector<std::string> norm_parameters;
  for (const auto& [name, t] : model.named_parameters())
    if (name.find("norm") != std::string::npos) norm_parameters.push_back(name);
  CHECK(norm_parameters == std::vector<std::string>{"encoder.layers.0.norm1.gain", "encoder.layers.0.norm2.gain",
                                                    "encoder.layers.1.norm1.gain", "encoder.layers.1.norm2.gain",
                                                    "encoder.norm.gain"});
  CHECK(parameter_count(options) == model.parameter_count());
  // With the gains at 1 the norms are identities: the encoder layer computes x + sa(x) then h + ff(h).
  CHECK(model.forward(ids({1, 2, 3, 4}, {1, 4})).shape() == Shape{1, 3});
}

TEST_CASE("components: the dense block is registered inline, so the layer keeps PyTorch's parameter names") {
  Generator init(6);
  const SequenceClassifier model(small(), init, nullptr);
  std::vector<std::string> layer0;
  for (const auto& [name, _] : model.encoder().layer(0).named_parameters()) layer0.push_back(name);
  CHECK(layer0 == std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                           "self_attn.out_proj.weight", "self_attn.out_proj.bias", "linear1.weight",
                                           "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight",
                                           "norm1.bias", "norm2.weight", "norm2.bias"});
  std::vector<std::string> children;
  for (const auto& [name, _] : model.encoder().layer(0).named_children()) children.push_back(name);
  CHECK(children == std::vector<std::string>{"self_attn", "linear1", "dropout", "linear2", "norm1", "norm2", "dropout1",
                                             "dropout2"});
}

TEST_CASE("components: every registered variant counts its parameters right and has its gradient checks") {
  std::string problems;
  for (const std::string& problem : component_problems()) problems += problem + "\n";
  CHECK(problems == "");
}

TEST_CASE("components: component_problems names a miscounted variant and one whose parameters are unchecked") {
  // Registered here, not at load time, so that the test above sees a clean registry when run alone.
  static const bool added =
      register_component<NormKind>({.name = "test-miscounted",
                                    .help = "a norm whose parameter_count is wrong and which has no gradcheck case",
                                    .make = [](int64_t dim, const VariantSettings&, Generator&) -> std::unique_ptr<Norm> {
                                      return std::make_unique<MiscountedNorm>(dim);
                                    },
                                    .parameter_count = [](int64_t dim, const VariantSettings&) { return dim - 1; }});
  REQUIRE(added);
  std::vector<std::string> about;
  for (const std::string& problem : component_problems())
    if (problem.rfind("norm 'test-miscounted'", 0) == 0) about.push_back(problem);
  REQUIRE(about.size() == 2);
  // The micro model has 5 norms (2 layers of 2, and the final one) of 4 gains each, counted as 3.
  CHECK(about[0] == "norm 'test-miscounted': parameter_count says 358 parameters, the built model has 363");
  CHECK_THAT(about[1], Catch::Matchers::Contains("MiscountedNorm holds parameters but has no gradcheck case"));
}

namespace {

/// A norm registration with these settings (never built: the declarations are what is checked).
NormKind::Entry norm_declaring(const std::string& name, std::vector<SettingSpec> settings) {
  return {.name = name,
          .help = "a test's declaration",
          .make = [](int64_t dim, const VariantSettings&, Generator&) -> std::unique_ptr<Norm> {
            return std::make_unique<ScaleNorm>(dim);
          },
          .parameter_count = [](int64_t dim, const VariantSettings&) { return dim; },
          .settings = std::move(settings)};
}

SettingSpec real_setting(std::string name, double value, double min = 0) {
  return {.name = std::move(name), .type = SettingType::real, .default_value = value, .min = min, .max = 1, .min_open = true};
}

}  // namespace

TEST_CASE("components: register_component refuses a bad settings declaration, naming the variant and the setting") {
  const std::pair<std::vector<SettingSpec>, std::string> cases[] = {
      {{real_setting("gain", 1.0), real_setting("gain", 2.0)}, "norm 'test-bad': setting 'gain' is declared twice"},
      {{real_setting("gain", -1.0)}, "norm 'test-bad': setting 'gain': default -1 is outside (0, 1]"},
      {{{.name = "gain", .type = SettingType::real, .default_value = 1.0, .min = 0}},
       "setting 'gain': a real declares both ends of its range, each held by float32 (0 or a magnitude in about "
       "[1.2e-38, 3.4e38]), not [0, inf)"},
      {{{.name = "gain", .type = SettingType::real, .default_value = 1e-3, .min = 1e-50, .max = 1}},
       "setting 'gain': a real declares both ends of its range"},
      {{real_setting("", 1.0)}, "setting '' needs a name of lower-case letters, digits and '_'"},
      {{real_setting("Gain", 1.0)}, "setting 'Gain' needs a name"},
      {{{.name = "gain", .type = SettingType::integer, .default_value = 1.0}},
       "setting 'gain' is integer but its default 1 is not"},
      {{{.name = "k", .type = SettingType::integer, .default_value = int64_t{2}, .max_setting = "n"}},
       "setting 'k': max_setting 'n' is not an integer setting of test-bad"},
      {{{.name = "n", .type = SettingType::integer, .default_value = int64_t{1}},
        {.name = "k", .type = SettingType::integer, .default_value = int64_t{2}, .max_setting = "n"}},
       "setting 'k': default 2 is above n's default 1"},
      {{{.name = "gain", .type = SettingType::real, .default_value = 1.0, .flag = "gain"}},
       "setting 'gain': flag 'gain' must start with --"},
      // moe's flag, and layernorm's eps declared with another type or flag than layernorm's.
      {{{.name = "gain", .type = SettingType::real, .default_value = 1.0, .flag = "--top-k"}},
       "setting 'gain': flag --top-k is ffn.top_k's"},
      {{{.name = "gain", .type = SettingType::real, .default_value = 1.0, .old_key = "top_k"}},
       "setting 'gain': old_key 'top_k' is ffn.top_k's"},
      {{{.name = "eps", .type = SettingType::integer, .default_value = int64_t{1}}},
       "setting 'eps' differs in type, flag, changes_model or old_key from norm 'layernorm''s"},
      {{real_setting("eps", 1e-6, 0)}, ""},  // the same setting as layernorm's: accepted, --norm-eps inherited
  };
  int i = 0;
  for (const auto& [settings, message] : cases) {
    INFO(message);
    const std::string name = message.empty() ? "test-shares-eps" : "test-bad";
    if (message.empty()) {
      CHECK(register_component<NormKind>(norm_declaring(name, settings)));
      CHECK(component<NormKind>(name).settings[0].flag == "--norm-eps");
      CHECK(component<NormKind>(name).settings[0].old_key == "layer_norm_eps");  // an older file's key maps here too
      const std::vector<DeclaredSetting> declared = declared_settings();
      const auto eps = std::find_if(declared.begin(), declared.end(),
                                    [](const DeclaredSetting& d) { return d.kind == "norm" && d.spec.name == "eps"; });
      REQUIRE(eps != declared.end());
      CHECK(eps->variants == std::vector<std::string>{"layernorm", name});
    } else {
      CHECK_THROWS_WITH(register_component<NormKind>(norm_declaring(name, settings)), Catch::Contains(message));
      CHECK_THROWS_AS(component<NormKind>(name), ValueError);  // nothing of a refused declaration is registered
    }
    ++i;
  }
  CHECK(i == 14);
}

TEST_CASE("components: a variant reads its settings typed, the default when none is given, and names a misread one") {
  ComponentSettings given;
  const VariantSettings moe = settings_of<FeedForwardKind>(given, "moe");
  CHECK(moe.integer("top_k") == 2);
  CHECK(moe.real("aux_weight") == 0.01);
  given.set("ffn", "top_k", int64_t{1});
  CHECK(moe.integer("top_k") == 1);
  CHECK_THROWS_WITH(moe.integer("topk"), "ffn 'moe' declares no setting 'topk'");
  CHECK_THROWS_WITH(moe.real("top_k"), "ffn 'moe': setting 'top_k' is declared integer, read as real");
  CHECK(setting_flag("ffn.aux_weight") == "--moe-aux-weight");
  CHECK(setting_flag("ffn.gain") == "");
  ClassifierOptions o = micro_classifier();
  o.ffn = "moe";
  o.settings = given;
  CHECK(layer_options(o).settings == given);  // the layers read the same settings
}
