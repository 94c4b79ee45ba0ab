// Evaluation and classify: no tape, the model's mode restored, and results that do not depend on how the
// examples are batched: padding is masked out of attention and pooling, and the loss is summed per example
// in example order. Not bit for bit: a reduction over a padded length (the softmax over keys, the mean
// over positions) groups the same non-zero terms differently when the length differs, so a logit can move
// by an ulp or two; predictions and counts are exact.
#include <catch2/catch.hpp>
#include <limits>

#include "autograd/autograd.h"
#include "train/data/batching.h"
#include "train/evaluate.h"

using namespace tapegrad;

namespace {

/// An untrained classifier for the majority task (so its logits are far from ties), lengths 1 to 12.
struct Fixture {
  TaskOptions task{"majority", 6, 1, 12};
  std::vector<Example> examples = validation_set(task, 7);
  TaskStream stream{task, 7};
  Vocab vocab = Vocab::build(stream.all_words());
  std::vector<std::string> labels = stream.labels();
  std::unique_ptr<nn::SequenceClassifier> model;

  explicit Fixture(const std::string& pool) {
    nn::ClassifierOptions o;
    o.vocab_size = vocab.size();
    o.d_model = 16;
    o.n_heads = 2;
    o.d_ff = 24;
    o.n_layers = 2;
    o.context_length = 10;  // shorter than the longest text: truncation too
    o.num_classes = static_cast<int64_t>(labels.size());
    o.pad_id = Vocab::kPad;
    o.pool = pool;
    o.dropout = 0;
    Generator init(11);
    model = std::make_unique<nn::SequenceClassifier>(o, init, nullptr);
  }
};

}  // namespace

TEST_CASE("train: evaluation gives identical results for every batch budget") {
  for (const std::string pool : {"mean", "cls"}) {
    INFO("pool " << pool);
    Fixture f(pool);
    REQUIRE(f.examples.size() >= 1000);
    // 1 token: one sequence per batch, no padding at all; 37: a few per batch, cut mid-length; one batch.
    const Evaluation alone = evaluate(*f.model, f.examples, f.vocab, f.labels, 1);
    for (const int64_t budget : {int64_t{37}, int64_t{640}, int64_t{1} << 40}) {
      INFO("budget " << budget);
      const Evaluation batched = evaluate(*f.model, f.examples, f.vocab, f.labels, budget);
      CHECK(batched.loss == Approx(alone.loss).epsilon(1e-6));
      CHECK(batched.accuracy == alone.accuracy);
      CHECK(batched.confusion == alone.confusion);
      CHECK(batched.count == alone.count);
      CHECK(batched.truncated == alone.truncated);
    }
    CHECK(alone.truncated > 0);
    CHECK(alone.count == static_cast<int64_t>(f.examples.size()));
  }
}

TEST_CASE("train: classify returns each sequence's logits in order, as its own forward does") {
  Fixture f("mean");
  std::vector<std::vector<int64_t>> sequences;
  for (size_t i = 0; i < 40; ++i) sequences.push_back(encode_text(f.examples[i].text, f.vocab, 10, false));
  const Tensor logits = classify(*f.model, sequences, 50);
  REQUIRE(logits.shape() == Shape{40, f.model->options().num_classes});
  const std::vector<double> all = logits.to_vector();
  NoGradGuard no_grad;
  for (size_t i = 0; i < sequences.size(); ++i) {
    INFO("sequence " << i);
    const PaddedIds one = pad_sequences(sequences, std::vector<int64_t>{static_cast<int64_t>(i)});
    const std::vector<double> z = f.model->forward(one.ids, one.key_padding_mask).to_vector();
    for (size_t k = 0; k < z.size(); ++k) CHECK(all[i * z.size() + k] == Approx(z[k]).margin(1e-6));
  }
}

TEST_CASE("train: evaluation records nothing on the tape and restores the model's mode") {
  Fixture f("mean");
  for (const bool training : {true, false}) {
    f.model->train(training);
    REQUIRE(grad_enabled());
    evaluate(*f.model, f.examples, f.vocab, f.labels, 100);
    CHECK(Tape::current().size() == 0);
    CHECK(f.model->is_training() == training);
    CHECK(grad_enabled());
  }
  CHECK_THROWS_AS(classify(*f.model, {{3, 4}}, 0), ValueError);
  CHECK(evaluation_tokens(32, 20) == 640);
  CHECK_THROWS_AS(evaluation_tokens(0, 20), ValueError);
}

TEST_CASE("train: classify and evaluate refuse logits and losses that are not finite, naming the example") {
  Fixture f("mean");
  const std::vector<Example> examples(f.examples.begin(), f.examples.begin() + 6);
  const auto set_head_bias = [&](std::vector<double> bias) {
    NoGradGuard no_grad;
    for (auto& [name, p] : f.model->named_parameters())
      if (name == "head.bias") p.copy_(tensor(bias, Shape{static_cast<int64_t>(bias.size())}, p.dtype()));
  };
  const int64_t K = f.model->options().num_classes;
  REQUIRE(K >= 2);

  SECTION("finite float32 weights whose forward overflows: classify and evaluate name the first sequence") {
    NoGradGuard no_grad;
    for (auto& [name, p] : f.model->named_parameters())
      if (name == "head.weight") p.copy_(full(p.shape(), 3e38, p.dtype()));
    try {
      classify(*f.model, {{3, 4}, {5}}, 100);
      FAIL("classify returned non-finite logits");
    } catch (const NonFiniteOutput& e) {
      CHECK((e.sequence >= 0 && e.sequence < 2 && e.class_index >= 0 && e.class_index < K));
      CHECK(!std::isfinite(e.value));
      CHECK_THAT(e.what(), Catch::Contains(cat("the logits of sequence ", e.sequence + 1, " are not finite")));
    }
    try {
      evaluate(*f.model, examples, f.vocab, f.labels, 100);
      FAIL("evaluate returned a result from non-finite logits");
    } catch (const NonFiniteOutput& e) {
      REQUIRE((e.sequence >= 0 && e.sequence < static_cast<int64_t>(examples.size())));
      CHECK_THAT(e.what(), Catch::Contains(cat("the logits of example ", e.sequence + 1, " (label '",
                                               examples[e.sequence].label, "') are not finite ('")));
    }
  }
  SECTION("weights that are not finite themselves: NaN, for the owner of the weights to report") {
    for (const double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
      INFO("bias " << bad);
      std::vector<double> bias(static_cast<size_t>(K), 0.0);
      bias[1] = bad;
      set_head_bias(bias);
      CHECK_THROWS_AS(classify(*f.model, {{3, 4}, {5}}, 100), NonFiniteOutput);
      const Evaluation e = evaluate(*f.model, examples, f.vocab, f.labels, 100);
      CHECK(std::isnan(e.loss));
      CHECK(std::isnan(e.accuracy));
      CHECK(e.confusion.cells().empty());
    }
  }
  SECTION("finite logits 1e308 apart: one example's loss overflows (float64)") {
    f.model->to(DType::float64);
    std::vector<double> bias(static_cast<size_t>(K), -1e308);
    bias[0] = 1e308;
    set_head_bias(bias);
    size_t first_not_0 = 0;
    while (f.labels[0] == examples[first_not_0].label) ++first_not_0;
    CHECK_THROWS_AS(evaluate(*f.model, examples, f.vocab, f.labels, 100), NonFiniteOutput);
    CHECK_THROWS_WITH(evaluate(*f.model, examples, f.vocab, f.labels, 100),
                      Catch::Contains(cat("the loss of example ", first_not_0 + 1)) &&
                          Catch::Contains("is not finite (inf) from finite logits"));
  }
  SECTION("each loss finite, their sum beyond double: the mean loss") {
    f.model->to(DType::float64);
    std::vector<double> bias(static_cast<size_t>(K), -0.6e308);
    bias[0] = 0.6e308;
    set_head_bias(bias);
    CHECK_THROWS_AS(evaluate(*f.model, f.examples, f.vocab, f.labels, 100), NonFiniteOutput);
    CHECK_THROWS_WITH(evaluate(*f.model, f.examples, f.vocab, f.labels, 100),
                      Catch::Contains("the mean loss is not finite"));
  }
}

TEST_CASE("train: evaluation's confusion is sparse and agrees with the accuracy") {
  Fixture f("mean");
  const Evaluation e = evaluate(*f.model, f.examples, f.vocab, f.labels, 640);
  REQUIRE(e.confusion.classes() == static_cast<int64_t>(f.labels.size()));
  int64_t total = 0, correct = 0;
  for (const auto& [cell, n] : e.confusion.cells()) {
    CHECK(n > 0);  // only pairs that occur are kept
    total += n;
    if (cell.first == cell.second) correct += n;
  }
  CHECK(total == e.count);
  CHECK(static_cast<double>(correct) / static_cast<double>(total) == e.accuracy);
}
