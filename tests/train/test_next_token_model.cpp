// A language model's data and loss (train/data/token_windows.h, train/next_token_model.h): windows that
// predict every token once, random training windows that resume exactly, padded batches, the loss and its
// evaluation independent of batching, config.json's keys, and a model that learns a repeating text.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <numeric>
#include <set>
#include <vector>

#include "autograd/autograd.h"
#include "optim/adam.h"
#include "support/temp_dir.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/model_config.h"
#include "train/checkpoint/safetensors.h"
#include "train/io/read_file.h"
#include "train/data/token_windows.h"
#include "train/next_token_model.h"

using namespace tapegrad;
using Catch::Matchers::Contains;

namespace {

std::vector<int64_t> iota_ids(int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

Example window(std::vector<int64_t> tokens) {
  Example example;
  example.tokens = std::move(tokens);
  return example;
}

std::unique_ptr<nn::LanguageModel> small_model(int64_t V, int64_t context, uint64_t seed = 5, bool tied = false) {
  nn::LanguageModelOptions o;
  o.tie_embeddings = tied;
  o.vocab_size = V;
  o.d_model = 16;
  o.n_heads = 2;
  o.d_ff = 32;
  o.n_layers = 2;
  o.context_length = context;
  o.dropout = 0;
  Generator init(seed);
  return std::make_unique<nn::LanguageModel>(o, init, nullptr);
}

}  // namespace

TEST_CASE("token windows: consecutive windows predict every token but the first exactly once") {
  const std::vector<int64_t> ids = iota_ids(10);
  const std::vector<Example> windows = consecutive_windows(ids, 4);
  REQUIRE(windows.size() == 3);
  CHECK(windows[0].tokens == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(windows[1].tokens == std::vector<int64_t>{4, 5, 6, 7, 8});
  CHECK(windows[2].tokens == std::vector<int64_t>{8, 9});
  std::vector<int64_t> predicted;
  for (const Example& w : windows) predicted.insert(predicted.end(), w.tokens.begin() + 1, w.tokens.end());
  CHECK(predicted == std::vector<int64_t>(ids.begin() + 1, ids.end()));
  CHECK(consecutive_windows(std::vector<int64_t>{3}, 4).empty());
  CHECK(consecutive_windows(iota_ids(9), 4).size() == 2);  // 0..4 and 4..8: nothing left over
  CHECK_THROWS_WITH(consecutive_windows(ids, 0), "consecutive_windows: T = 0 must be >= 1");
}

TEST_CASE("token windows: random windows are runs of the text from every start, and resume exactly") {
  const auto ids = std::make_shared<const std::vector<int64_t>>(iota_ids(100));
  RandomWindows windows(ids, 9, 11);
  CHECK(windows.window() == 10);
  std::set<int64_t> starts;
  for (const Example& w : windows.next_batch(3000)) {
    REQUIRE(w.tokens.size() == 10);
    for (size_t i = 1; i < w.tokens.size(); ++i) CHECK(w.tokens[i] == w.tokens[i - 1] + 1);
    starts.insert(w.tokens.front());
  }
  CHECK(starts.size() == 91);  // every start 0..90
  const Generator::State state = windows.state();
  const std::vector<Example> next = windows.next_batch(5);
  RandomWindows resumed(ids, 9, 999);
  resumed.set_state(state);
  CHECK(resumed.next_batch(5) == next);
  // A text shorter than a window: windows of the whole text.
  RandomWindows short_text(std::make_shared<const std::vector<int64_t>>(iota_ids(3)), 9, 1);
  CHECK(short_text.next_batch(1).front().tokens == std::vector<int64_t>{0, 1, 2});
  CHECK_THROWS_WITH(RandomWindows(std::make_shared<const std::vector<int64_t>>(iota_ids(1)), 9, 1),
                    "RandomWindows: a language model needs at least 2 tokens of text, got 1");
}

TEST_CASE("next-token model: batches are padded with ignored targets, bad windows are named") {
  const WindowBatch batch = make_window_batch({window({1, 2, 3, 4}), window({5, 6})}, 8, 10);
  CHECK(batch.inputs.shape() == Shape({2, 3}));
  CHECK(batch.inputs.to_vector() == std::vector<double>{1, 2, 3, 5, 0, 0});
  CHECK(batch.targets.to_vector() == std::vector<double>{2, 3, 4, 6, -100, -100});
  CHECK(batch.predicted == 4);
  CHECK_THROWS_WITH(make_window_batch({window({1})}, 8, 10),
                    "window 1 has 1 tokens: a window holds 2 to context_length + 1 = 9");
  CHECK_THROWS_WITH(make_window_batch({window({1, 2}), window({1, 10})}, 8, 10),
                    "window 2: token id 10 is outside the vocabulary [0, 10)");
}

TEST_CASE("next-token model: the loss is the mean next-token cross-entropy, and evaluation does not depend on batching") {
  NextTokenModel model(small_model(7, 6));
  const std::vector<int64_t> text = {1, 3, 5, 2, 6, 0, 4, 4, 1, 2, 3, 5, 6, 0, 1, 2};
  const std::vector<Example> windows = consecutive_windows(text, 6);  // 7 + 7 + 3 tokens
  // loss() by hand: every position's -log softmax(logits)[next token], averaged.
  double by_hand = 0;
  int64_t count = 0;
  {
    NoGradGuard no_grad;
    for (const Example& w : windows) {
      const auto n = static_cast<int64_t>(w.tokens.size()) - 1;
      const std::vector<double> z =
          model.model().forward(ids(std::vector<int64_t>(w.tokens.begin(), w.tokens.end() - 1), {1, n})).to_vector();
      for (int64_t t = 0; t < n; ++t) {
        double sum = 0;
        for (int64_t k = 0; k < 7; ++k) sum += std::exp(z[t * 7 + k]);
        by_hand += std::log(sum) - z[t * 7 + w.tokens[t + 1]];
        ++count;
      }
    }
  }
  CHECK(count == 15);
  const BatchLoss loss = model.loss(windows);
  CHECK(loss.task.item() == Approx(by_hand / 15).epsilon(1e-5));
  CHECK_FALSE(loss.auxiliary.defined());
  const Evaluation whole = model.evaluate(windows, 1000);
  const Evaluation one_by_one = model.evaluate(windows, 1);
  CHECK(whole.count == 15);
  CHECK(one_by_one.count == 15);
  CHECK(whole.loss == Approx(by_hand / 15).epsilon(1e-5));
  CHECK(one_by_one.loss == Approx(whole.loss).epsilon(1e-6));
  CHECK(whole.accuracy == one_by_one.accuracy);
  CHECK(model.module().is_training());  // evaluation restores the mode
}

TEST_CASE("next-token model: config.json is the language model's options, and a repeating text is learnt") {
  NextTokenModel model(small_model(5, 8));
  const nlohmann::json config = model.config();
  CHECK(config.at("kind") == "language_model");
  CHECK(config.at("d_model") == 16);
  CHECK(config.at("norm_first") == true);
  CHECK(config.at("settings").at("attention").at("causal") == true);
  for (const char* absent : {"num_classes", "pool", "final_norm", "pad_id"}) CHECK_FALSE(config.contains(absent));
  CHECK_FALSE(config.at("settings").contains("pool"));

  // "0 1 2 3 4 0 1 2 3 4 ...": after the first token every next one is certain.
  std::vector<int64_t> text;
  for (int i = 0; i < 200; ++i) text.push_back(i % 5);
  RandomWindows windows(std::make_shared<const std::vector<int64_t>>(text), 8, 3);
  const std::vector<Example> valid = consecutive_windows(text, 8);
  const double before = model.evaluate(valid, 256).loss;
  optim::AdamW optimizer(model.module().named_parameters(), {.lr = 1e-2});
  for (int step = 0; step < 60; ++step) {
    optimizer.zero_grad();
    model.loss(windows.next_batch(8)).task.backward();
    optimizer.step();
  }
  const Evaluation after = model.evaluate(valid, 256);
  INFO("loss before " << before << ", after " << after.loss);
  CHECK(before > 1.0);  // about ln 5 = 1.61 at initialisation
  CHECK(after.loss < 0.3);
  CHECK(after.accuracy > 0.9);
}

TEST_CASE("next-token model: config.json reads back to the same options, and a wrong one is refused by key") {
  NextTokenModel model(small_model(5, 8));
  const nlohmann::json config = model.config();
  const nn::LanguageModelOptions read = language_model_options_from_json(config, "config.json");
  CHECK(read.vocab_size == 5);
  CHECK(read.context_length == 8);
  CHECK(language_model_config_json(read) == config);
  const auto refused = [&](nlohmann::json edited, const std::string& message) {
    INFO(edited.dump());
    CHECK_THROWS_AS(language_model_options_from_json(edited, "config.json"), IOError);
    CHECK_THROWS_WITH(language_model_options_from_json(edited, "config.json"), Contains(message));
  };
  nlohmann::json edited = config;
  edited["kind"] = "classifier";
  refused(edited, "config.json: 'kind' is 'classifier', not 'language_model'");
  edited = config;
  edited["num_classes"] = 2;
  refused(edited, "config.json: 'num_classes' is not a key of a language model");
  edited = config;
  edited["n_heads"] = 3;
  refused(edited, "config.json");
  edited = config;
  edited.erase("d_model");
  refused(edited, "d_model");
  edited = config;
  edited["attention"] = "no-such-attention";
  refused(edited, "no-such-attention");
}

TEST_CASE("next-token model: tie_embeddings is a boolean key of config.json, false when an older file lacks it") {
  NextTokenModel tied(small_model(5, 8, 5, true));
  const nlohmann::json config = tied.config();
  CHECK(config.at("tie_embeddings") == true);
  CHECK(language_model_options_from_json(config, "config.json").tie_embeddings);
  CHECK(language_model_config_json(language_model_options_from_json(config, "config.json")) == config);
  CHECK(NextTokenModel(small_model(5, 8)).config().at("tie_embeddings") == false);
  nlohmann::json older = config;
  older.erase("tie_embeddings");
  CHECK_FALSE(language_model_options_from_json(older, "config.json").tie_embeddings);
  for (const nlohmann::json& wrong : {nlohmann::json(1), nlohmann::json("true"), nlohmann::json(nullptr)}) {
    nlohmann::json edited = config;
    edited["tie_embeddings"] = wrong;
    INFO(edited.dump());
    CHECK_THROWS_AS(language_model_options_from_json(edited, "config.json"), IOError);
    CHECK_THROWS_WITH(language_model_options_from_json(edited, "config.json"),
                      Contains("config.json: 'tie_embeddings' must be true or false"));
  }
}

TEST_CASE("next-token model: AdamW sees a tied table once and updates it once per step") {
  NextTokenModel model(small_model(5, 8, 5, true));
  const nn::LanguageModel& lm = model.model();
  optim::AdamW optimizer(model.module().named_parameters(), {.lr = 1e-2, .weight_decay = 0});
  std::set<std::string> state;
  for (const auto& [name, t] : optimizer.state()) state.insert(name);
  CHECK(state.count("exp_avg.embed.weight") == 1);
  CHECK(state.count("exp_avg.head.weight") == 0);
  const Tensor before = lm.embed().weight.detach().clone();
  optimizer.zero_grad();
  model.loss(consecutive_windows(std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4}, 8)).task.backward();
  const Tensor g = lm.embed().weight.grad().detach().clone();
  optimizer.step();
  // Adam's first step: m̂ = g, v̂ = g², so p -= lr · g / (|g| + eps): a step of lr where g is not tiny. Updated
  // twice (once per name), each element would move by 2 lr.
  const std::vector<double> w0 = before.to_vector(), w1 = lm.embed().weight.to_vector(), dw = g.to_vector();
  for (size_t i = 0; i < w0.size(); ++i) {
    INFO("element " << i << ": gradient " << dw[i]);
    CHECK(w1[i] == Approx(w0[i] - 1e-2 * dw[i] / (std::abs(dw[i]) + 1e-8)).margin(1e-6));
  }
  CHECK(max_abs_diff(lm.head().weight, lm.embed().weight) == 0);
  // The state dictionary names the table twice: an optimizer over it is refused, naming both.
  CHECK_THROWS_WITH(optim::AdamW(model.module().state_dict()),
                    "AdamW: parameters 'embed.weight' and 'head.weight' are the same tensor; list shared weights once");
}

TEST_CASE("next-token model: a tied checkpoint holds both names and loads back tied, an untied one is refused") {
  const testing::TempDir dir;
  NextTokenModel model(small_model(5, 8, 5, true));
  const Vocab vocab = Vocab::build({"a b c"});
  const std::vector<std::string> labels;
  write_checkpoint_folder(dir / "tied", {&model.module(), model.config(), &vocab, &labels, nullptr, nlohmann::json()});
  const SafetensorsFile weights = load_safetensors(dir / "tied/model.safetensors");
  // Both names, as PyTorch's state_dict() of the tied module, so that its strict load accepts the file.
  REQUIRE(weights.contains("embed.weight"));
  REQUIRE(weights.contains("head.weight"));
  CHECK(max_abs_diff(weights.at("embed.weight"), weights.at("head.weight")) == 0);
  CHECK(weights.tensors.size() == model.module().state_dict().size());

  const nlohmann::json config = nlohmann::json::parse(read_whole_file(dir / "tied/config.json", kJsonFileLimit));
  const nn::LanguageModelOptions options = language_model_options_from_json(config, "config.json");
  REQUIRE(options.tie_embeddings);
  Generator other_seed(99);
  nn::LanguageModel loaded(options, other_seed, nullptr);
  loaded.load_state_dict(weights.tensors);
  for (const auto& [name, t] : model.module().state_dict()) {
    INFO(name);
    CHECK(max_abs_diff(t, weights.at(name)) == 0);
  }
  CHECK(max_abs_diff(loaded.embed().weight, model.model().embed().weight) == 0);
  CHECK(&loaded.head().weight.impl() == &loaded.embed().weight.impl());  // one tensor still

  // An untied model's file holds two different tables: loading it tied would drop one of them.
  NextTokenModel untied(small_model(5, 8, 6));
  CHECK_THROWS_WITH(loaded.load_state_dict(untied.module().state_dict()),
                    Contains("1 shared but different ('embed.weight' and 'head.weight' are one tensor: element 0 is"));
}
