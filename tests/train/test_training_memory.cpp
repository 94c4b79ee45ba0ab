// The memory check (train/training_memory.h): every model kind's estimate against the tensor bytes a real
// run of it allocates (autograd's storage counters), the language model's growth with its vocabulary, and
// the refusal of a run that cannot fit, in the kind's words, before --out exists.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "support/cli.h"
#include "support/small_run.h"
#include "support/temp_dir.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/model_config.h"
#include "train/cli/train_flags.h"
#include "train/trainer.h"
#include "train/training_memory.h"

namespace fs = std::filesystem;
using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

/// A text of `words` words drawn from `distinct` distinct ones, every one at least once, 12 a line.
std::string word_text(int64_t distinct, int64_t words, uint64_t seed = 3) {
  Generator rng(seed);
  std::string text;
  for (int64_t i = 0; i < words; ++i) {
    const int64_t word = i < distinct ? i : static_cast<int64_t>(rng.uniform() * static_cast<double>(distinct));
    text += cat("w", word % distinct, (i + 1) % 12 == 0 ? "\n" : " ");
  }
  return text + "\n";
}

/// A language model's run over `text` (written into dir), small enough to train in a second.
TrainOptions language_model_run(const TempDir& dir, const std::string& text, const std::string& tokenizer) {
  TrainOptions o = small_options(dir / "run");
  o.task.name = kLanguageModelTask;
  o.data = dir.file("text.txt", text);
  o.tokenizer = tokenizer;
  o.context_length = 32;
  o.model = nn::body_options(nn::language_model_options(o.model));
  o.model.d_model = 32;
  o.model.d_ff = 64;
  return o;
}

struct MeasuredRun {
  double peak = 0;     // tensor bytes alive at once, at most, over the run (its steps, validations, checkpoints)
  double estimate = 0;  // training_memory_bytes of the options the run recorded (vocabulary and context filled in)
  std::string kind;    // config.json's
};

/// The run trained for 20 steps, validating and saving every 10.
MeasuredRun measure(TrainOptions o) {
  o.steps = 20;
  o.eval_every = 10;
  std::ostringstream log;
  reset_peak_tensor_bytes();
  const uint64_t before = tensor_bytes().live;
  train(o, log);
  MeasuredRun run;
  run.peak = static_cast<double>(tensor_bytes().peak - before);
  const std::string state_path = o.out + "/trainer.json";
  const nlohmann::json state = nlohmann::json::parse(read_file(state_path));
  const TrainOptions recorded = train_options_from_json(state.at("options"), state_path);
  run.estimate = training_memory_bytes(recorded);
  run.kind = checkpoint_kind(o.out);
  return run;
}

}  // namespace

TEST_CASE("training memory: every model kind's estimate covers a real run's peak tensor bytes, within 8 times") {
  struct Case {
    std::string name, kind;
    std::function<TrainOptions(const TempDir&)> options;
  };
  const std::vector<Case> cases = {
      {"classifier, adamw", kClassifierKind, [](const TempDir& d) { return small_options(d / "run"); }},
      {"classifier, sgd", kClassifierKind,
       [](const TempDir& d) {
         TrainOptions o = small_options(d / "run");
         o.optimizer = "sgd";
         return o;
       }},
      {"language model, characters", kLanguageModelKind,
       [](const TempDir& d) { return language_model_run(d, word_text(30, 3000), "characters"); }},
      {"language model, 400 words", kLanguageModelKind,
       [](const TempDir& d) { return language_model_run(d, word_text(400, 3000), "words"); }},
      {"language model, 400 words, tied", kLanguageModelKind,
       [](const TempDir& d) {
         TrainOptions o = language_model_run(d, word_text(400, 3000), "words");
         o.tie_embeddings = true;
         return o;
       }},
      {"language model, 400 words, sgd, checkpointed layers", kLanguageModelKind,
       [](const TempDir& d) {
         TrainOptions o = language_model_run(d, word_text(400, 3000), "words");
         o.optimizer = "sgd";
         o.activation_checkpointing = "on";
         return o;
       }},
  };
  std::set<std::string> kinds;
  for (const Case& c : cases) {
    INFO(c.name);
    TempDir dir("tapegrad_test_training_memory");
    const MeasuredRun run = measure(c.options(dir));
    INFO("peak " << run.peak << " bytes, estimate " << run.estimate);
    CHECK(run.kind == c.kind);
    CHECK(run.estimate >= run.peak);
    CHECK(run.estimate <= 8 * run.peak);
    kinds.insert(run.kind);
  }
  CHECK(kinds == std::set<std::string>{kClassifierKind, kLanguageModelKind});  // every kind config.json names
}

TEST_CASE("training memory: a language model's estimate grows with V by its head and (B, T, V) logits, as a run's peak") {
  const auto need = [](int64_t vocab, bool tied) {
    TrainOptions o;
    o.task.name = kLanguageModelTask;
    o.batch_size = 16;
    o.context_length = 32;
    o.tie_embeddings = tied;
    o.model = nn::body_options(nn::language_model_options(o.model));
    o.model.d_model = 32;
    o.model.d_ff = 64;
    o.model.vocab_size = vocab;
    return training_memory(o, train_flag_name);
  };
  for (const bool tied : {false, true}) {
    INFO("tied " << tied);
    const TrainingMemory small = need(1000, tied), large = need(3000, tied);
    for (const TrainingMemory& m : {small, large}) CHECK((m.step > m.evaluation && m.step > m.checkpoint));
    // Per token of the vocabulary: the embedding's row and the head's (one when tied), each with its gradient and
    // Adam's two moments, 16 bytes a parameter; in the step, the logits and their gradient at every one of the
    // B x T positions and the head's weight gradient beside them.
    const double C = 32, BT = 16 * 32, per_token = 16 * C * (tied ? 1 : 2) + 4 * (2 * BT + C);
    CHECK(large.parameters - small.parameters == 2000 * C * (tied ? 1 : 2));
    CHECK(large.bytes() - small.bytes() == Approx(2000 * per_token));
  }
  // A real run's peak grows with its vocabulary, by no more than the estimate says.
  TempDir dir("tapegrad_test_training_memory");
  TrainOptions few = language_model_run(dir, word_text(200, 4000), "words");
  const MeasuredRun with_few = measure(few);
  fs::remove_all(few.out);
  const MeasuredRun with_many = measure(language_model_run(dir, word_text(1200, 4000), "words"));
  const double grown = with_many.peak - with_few.peak, estimated = with_many.estimate - with_few.estimate;
  INFO("the peak grew " << grown << " bytes, the estimate " << estimated);
  CHECK(grown > 0);
  CHECK(estimated >= grown);
  CHECK(estimated <= 4 * grown);
}

TEST_CASE("training memory: a language model that cannot fit is refused in its own words, naming its flags, before --out exists") {
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer reserves terabytes of shadow memory: ulimit -v stops it at start
  TempDir dir("tapegrad_test_training_memory");
  const std::string out = dir / "run", text = quote(dir.file("words.txt", word_text(20000, 40000)));
  const std::string vocabulary = "--tokenizer words takes it from the text (20001 tokens, one a distinct word)";
  struct Case {
    std::string name, args;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {"the (B, T, V) logits of 20 000 words", "--tokenizer words --context-length 256 --batch-size 512",
       {"this language model needs about 21.3 GiB to train (1.31e+06 parameters, batch 512 x context 256, "
        "vocabulary 20001), more than the 1.5 GiB of address space left (ulimit -v 1.9 GiB, of which",
        "lower --batch-size, --context-length, --d-model, --ff or --layers, or the vocabulary: " + vocabulary}},
      {"the V x C embedding and head of 20 000 words", "--tokenizer words --d-model 4096 --layers 0 --batch-size 1",
       {"this language model needs about", "(1.64e+08 parameters, batch 1 x context 128, vocabulary 20001)", vocabulary}},
      // bpe's vocabulary is known from the flags: refused before the text is read (here: there is none)
      {"a bpe vocabulary of 50 000", "--tokenizer bpe --vocab-size 50000 --batch-size 512 --context-length 256",
       {"vocabulary 50000), more than", "lower --batch-size, --context-length, --vocab-size, --d-model, --ff or --layers"}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string data = c.name.starts_with("a bpe") ? quote(dir / "no-such-text.txt") : text;
    const Result r = run_shell(dir, cat("ulimit -v 2000000 && timeout 60 ", tapegrad_command(), " train --task lm --data ",
                                        data, " ", c.args, " --out ", quote(out)));
    require_one_line_error(r, c.mentions.front());
    for (const std::string& mention : c.mentions) CHECK_THAT(r.err, Catch::Contains(mention));
    CHECK(!fs::exists(out));
  }
#endif
}

TEST_CASE("training memory: every option a refusal names is given by its flag of tapegrad train") {
  std::set<std::string> fields;
  const OptionNames recording = [&fields](std::string_view field) {
    fields.insert(std::string(field));
    return std::string(field);
  };
  TrainOptions classifier_task = small_options("run");
  classifier_task.model.vocab_size = 10;
  classifier_task.model.num_classes = 6;
  classifier_task.model.context_length = 13;
  TrainOptions classifier_data = classifier_task, classifier_init = classifier_task;
  classifier_data.data = "train.tsv";
  classifier_init.init = "runs/x";
  std::vector<TrainOptions> runs = {classifier_task, classifier_data, classifier_init};
  for (const std::string tokenizer : {"characters", "words", "bpe"})
    for (const std::string model : {"", "m.model"})
      for (const std::string init : {"", "runs/x"}) {
        TrainOptions lm = classifier_data;
        lm.task.name = kLanguageModelTask;
        lm.init = init;
        lm.tokenizer = tokenizer;
        lm.tokenizer_model = tokenizer == "bpe" ? model : "";
        lm.model = nn::body_options(nn::language_model_options(lm.model));
        lm.model.vocab_size = 100;
        runs.push_back(lm);
      }
  for (const TrainOptions& o : runs) training_memory(o, recording);
  CHECK(fields.size() >= 10);
  for (const std::string& field : fields) {
    INFO(field);
    CHECK(train_flag_name(field) == cli::flag_for(field));
  }
}
