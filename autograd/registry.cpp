#include "autograd/registry.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "autograd/tape.h"

namespace tapegrad {

namespace {
std::set<std::string>& kinds() {
  static std::set<std::string> all;
  return all;
}
std::vector<GradcheckCase>& cases() {
  static std::vector<GradcheckCase> all;
  return all;
}
}  // namespace

bool register_node_kind(const char* name) {
  kinds().insert(name);
  return true;
}

std::vector<std::string> node_kinds() { return {kinds().begin(), kinds().end()}; }

bool register_gradchecks(std::vector<GradcheckCase> more) {
  for (auto& c : more) cases().push_back(std::move(c));
  return true;
}

const std::vector<GradcheckCase>& gradcheck_cases() { return cases(); }

std::vector<std::string> node_kinds_without_case() {
  std::set<std::string> recorded;
  for (const GradcheckCase& c : cases())
    for (const std::string& kind : c.run(GradcheckOptions::float64()).ops_seen) recorded.insert(kind);
  std::vector<std::string> missing;
  for (const std::string& kind : kinds())
    if (!recorded.count(kind)) missing.push_back(kind);
  return missing;
}

std::vector<Tensor> make_inputs(const std::vector<InputSpec>& specs, Generator& gen, DType dtype) {
  std::vector<Tensor> inputs;
  for (const InputSpec& spec : specs) {
    Tensor t;
    switch (spec.kind) {
      case InputSpec::Kind::normal: t = randn(spec.shape, gen, dtype); break;
      case InputSpec::Kind::positive: t = uniform(spec.shape, gen, 0.5, 2.0, dtype); break;
      case InputSpec::Kind::apart: {
        // Distinct magnitudes 0.2 + k/n (shuffled) with random signs: no ties, nothing near 0.
        const int64_t n = spec.shape.numel();
        std::vector<double> values(n);
        for (int64_t k = 0; k < n; ++k) values[k] = 0.2 + static_cast<double>(k) / std::max<int64_t>(n, 1);
        for (int64_t k = n - 1; k > 0; --k) std::swap(values[k], values[gen.below(k + 1)]);
        for (double& v : values) v = gen.bernoulli(0.5) ? -v : v;
        t = tensor(values, spec.shape, dtype);
        break;
      }
      case InputSpec::Kind::ids: {
        std::vector<int64_t> values(spec.shape.numel());
        for (auto& v : values) v = static_cast<int64_t>(gen.below(spec.limit));
        t = ids(values, spec.shape);
        break;
      }
      case InputSpec::Kind::mask: {
        std::vector<int> values(spec.shape.numel());
        for (auto& v : values) v = gen.bernoulli(0.3);
        t = mask(values, spec.shape);
        break;
      }
    }
    if (spec.requires_grad && is_floating(t.dtype())) t.requires_grad_();
    inputs.push_back(t);
  }
  return inputs;
}

GradcheckCase op_case(std::string name, std::vector<InputSpec> specs, TensorFn fn) {
  return {name, [specs, fn](const GradcheckOptions& options) {
            Generator gen(options.seed);
            return gradcheck(fn, make_inputs(specs, gen, options.dtype), options);
          }};
}

}  // namespace tapegrad
