#include "nn/component_checks.h"

#include <cmath>
#include <functional>
#include <set>

#include "nn/classifier.h"
#include "nn/module_gradcheck.h"

namespace tapegrad::nn {

namespace {

/// micro_classifier() with pre-LN layers and a final norm, so that a norm variant stands in three places.
ClassifierOptions micro() {
  ClassifierOptions o = micro_classifier();
  o.norm_first = true;
  o.final_norm = true;
  return o;
}

/// Every module type below (and including) m that holds parameters of its own and has no module_case.
void find_unchecked(const Module& m, std::set<std::string>& out) {
  if (!m.own_parameters().empty() && !module_checked(typeid(m))) out.insert(type_name(typeid(m)));
  for (const auto& child : m.children()) find_unchecked(*child.second, out);
}

void check_variant(const std::string& what, const ClassifierOptions& options, std::vector<std::string>& problems) {
  try {
    Generator init(11);
    SequenceClassifier model(options, init, nullptr);
    model.to(DType::float64);
    model.eval();
    if (const int64_t counted = parameter_count(options); counted != model.parameter_count())
      problems.push_back(
          cat(what, ": parameter_count says ", counted, " parameters, the built model has ", model.parameter_count()));
    std::set<std::string> unchecked;
    find_unchecked(model, unchecked);
    for (const std::string& type : unchecked)
      problems.push_back(cat(what, ": ", type, " holds parameters but has no gradcheck case (nn::module_case)"));
    const Tensor first =
        prepends_cls(options) ? ids({2, 3, 4, 5, 2, 6, 1, 0}, {2, 4}) : ids({3, 4, 5, 6, 6, 1, 0, 0}, {2, 4});
    const Tensor logits = model.forward(first, mask({0, 0, 0, 0, 0, 0, 1, 1}, {2, 4}));
    bool finite = true;
    for (double v : logits.to_vector()) finite = finite && std::isfinite(v);
    if (!(logits.shape() == Shape{2, 3}) || !finite)
      problems.push_back(
          cat(what, ": logits ", logits.shape(), finite ? "" : " not finite", ", expected finite [2,3]"));
  } catch (const std::exception& e) {
    problems.push_back(cat(what, ": ", e.what()));
  }
}

template <class Kind>
void check_kind(std::string ClassifierOptions::*field, std::vector<std::string>& problems) {
  for (const std::string& name : component_names<Kind>()) {
    ClassifierOptions options = micro();
    options.*field = name;
    check_variant(cat(Kind::kName, " ", in_quotes(name)), options, problems);
  }
}

}  // namespace

std::vector<std::string> component_problems() {
  std::vector<std::string> problems;
  check_kind<PositionalKind>(&ClassifierOptions::positional, problems);
  check_kind<AttentionKind>(&ClassifierOptions::attention, problems);
  check_kind<NormKind>(&ClassifierOptions::norm, problems);
  check_kind<FeedForwardKind>(&ClassifierOptions::ffn, problems);
  check_kind<PoolKind>(&ClassifierOptions::pool, problems);
  check_kind<ActivationKind>(&ClassifierOptions::activation, problems);
  return problems;
}

}  // namespace tapegrad::nn
