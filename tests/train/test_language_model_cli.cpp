// A language model through the command line, as a user runs it: `train --task lm` on a text file, its run
// directory, --resume continuing bit-identically, `generate` (the same seed gives the same text, the KV cache
// the same text as recomputing), `eval` agreeing with training's validation, and every bad input one line.
#include <catch2/catch.hpp>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli.h"
#include "support/temp_dir.h"

using namespace tapegrad;
using namespace tapegrad::testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// A small text with structure to learn, spaces, newlines and characters outside ASCII.
std::string corpus(int lines) {
  const char* sentences[] = {"the café serves naïve crêpes.", "a fox jumps over the lazy dog.",
                             "every token is predicted once —", "the dog sleeps under the café table."};
  std::string text;
  for (int i = 0; i < lines; ++i) text += std::string(sentences[(i * 7) % 4]) + (i % 3 == 2 ? "\n\n" : "\n");
  return text;
}

const std::string kSmallLm = " --context-length 24 --d-model 16 --heads 2 --ff 32 --batch-size 8 --eval-every 20";
const std::string kSmallLmOften = " --context-length 24 --d-model 16 --heads 2 --ff 32 --batch-size 8 --eval-every 5";

json last_json_line(const Result& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(!lines.empty());
  return json::parse(lines.back());
}

}  // namespace

TEST_CASE("train: lm trains on a text file and keeps its tokenizer in the run directory") {
  TempDir dir("tapegrad_test_lm_cli");
  const std::string text = dir.file("corpus.txt", corpus(120)), out = dir / "run";
  const json summary =
      last_json_line(run_cli(dir, cat("train --task lm --data ", quote(text), kSmallLm, " --steps 60 --out ", quote(out), " --json")));
  CHECK(summary.at("steps") == 60);
  // Better than guessing among the ~30 characters (ln 30 = 3.4 nats), and the figures agree with each other.
  const double loss = summary.at("final_valid_loss");
  CHECK(loss < 2.5);
  CHECK(summary.at("final_valid_perplexity").get<double>() == Approx(std::exp(loss)));
  CHECK(summary.at("final_valid_bits_per_character").get<double>() > 0);
  for (const char* file : {"tokenizer.json", "config.json", "model.safetensors", "optimizer.safetensors", "trainer.json"})
    CHECK(fs::exists(fs::path(out) / file));
  CHECK(!fs::exists(fs::path(out) / "vocab.txt"));
  CHECK(!fs::exists(fs::path(out) / "labels.txt"));
  CHECK(json::parse(read_file(out + "/config.json")).at("kind") == "language_model");
}

TEST_CASE("train: lm resumed from a checkpoint ends with the weights of an uninterrupted run") {
  TempDir dir("tapegrad_test_lm_cli");
  const std::string text = dir.file("corpus.txt", corpus(80));
  const std::string args = cat("train --task lm --data ", quote(text), kSmallLm, " --dropout 0.1");
  REQUIRE(run_cli(dir, cat(args, " --steps 40 --out ", quote(dir / "whole"))).exit_code == 0);
  REQUIRE(run_cli(dir, cat(args, " --steps 20 --out ", quote(dir / "parts"))).exit_code == 0);
  const Result resumed = run_cli(dir, cat("train --resume ", quote(dir / "parts"), " --steps 40"));
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(read_file(dir / "whole/model.safetensors") == read_file(dir / "parts/model.safetensors"));
}

TEST_CASE("train: lm killed with SIGKILL mid-run leaves a checkpoint that resumes and generates") {
  TempDir dir("tapegrad_test_lm_cli");
  const std::string text = dir.file("corpus.txt", corpus(120)), out = dir / "run";
  // Checkpoints every 5 steps of a run far longer than the test: killed once its first checkpoint is published
  // (waited for, not timed, so that a slow build such as the sanitizers' gets there too).
  const std::string trainer_json = quote(out + "/trainer.json");
  const Result killed = run_shell(
      dir, cat(tapegrad_command(), " train --task lm --data ", quote(text), kSmallLmOften, " --steps 1000000 --out ",
               quote(out), " & pid=$!; i=0; while [ ! -e ", trainer_json, " ] && [ $i -lt 3000 ]; do sleep 0.1; ",
               "i=$((i + 1)); done; sleep 0.3; kill -9 $pid; wait $pid"));
  INFO("exit " << killed.exit_code << ", stderr: " << killed.err.substr(0, 400));
  REQUIRE(killed.signal == SIGKILL);
  const json state = json::parse(read_file(out + "/trainer.json"));
  const int64_t step = state.at("step");
  REQUIRE(step >= 5);
  const Result resumed = run_cli(dir, cat("train --resume ", quote(out), " --steps ", step + 5));
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(json::parse(read_file(out + "/trainer.json")).at("step") == step + 5);
  const Result generated = run_cli(dir, cat("generate --checkpoint ", quote(out), " --prompt 'the' --max-new-tokens 5"));
  INFO(generated.err);
  CHECK(generated.exit_code == 0);
}

TEST_CASE("train: lm generate and eval read the run directory alone") {
  TempDir dir("tapegrad_test_lm_cli");
  const std::string text = dir.file("corpus.txt", corpus(120)), valid = dir.file("valid.txt", corpus(30));
  const std::string out = dir / "run";
  const json summary = last_json_line(run_cli(
      dir, cat("train --task lm --data ", quote(text), " --valid ", quote(valid), kSmallLm, " --steps 40 --out ", quote(out),
               " --json")));

  SECTION("eval scores the validation text as training's last validation did") {
    const json scored = last_json_line(run_cli(dir, cat("eval --checkpoint ", quote(out), " --data ", quote(valid), " --json")));
    CHECK(scored.at("loss").get<double>() == Approx(summary.at("final_valid_loss").get<double>()).epsilon(1e-9));
    CHECK(scored.at("perplexity").get<double>() == Approx(std::exp(scored.at("loss").get<double>())));
    CHECK(scored.at("predicted") == scored.at("tokens").get<int64_t>() - 1);
  }
  SECTION("generate: the same seed gives the same text, the cache the same text as recomputing") {
    const std::string args = cat("generate --checkpoint ", quote(out), " --prompt 'the ' --max-new-tokens 40 --temperature 0.9 --top-k 10 --top-p 0.95");
    const Result first = run_cli(dir, args + " --seed 3"), again = run_cli(dir, args + " --seed 3");
    const Result uncached = run_cli(dir, args + " --seed 3 --no-cache"), other = run_cli(dir, args + " --seed 4");
    INFO(first.err);
    REQUIRE(first.exit_code == 0);
    CHECK(first.out.rfind("the ", 0) == 0);  // the prompt, then what follows it
    CHECK(first.out == again.out);
    CHECK(first.out == uncached.out);
    CHECK(first.out != other.out);
    CHECK_THAT(first.err, Catch::Contains("40 tokens") && Catch::Contains("KV cache"));
  }
  SECTION("generate --json: each new token with its id, text and log-probability; temperature 0 is greedy") {
    const std::string args = cat("generate --checkpoint ", quote(out), " --prompt 'a fox' --max-new-tokens 12 --temperature 0 --json");
    json generated = last_json_line(run_cli(dir, args)), again = last_json_line(run_cli(dir, args));
    CHECK(generated.at("tokens") == again.at("tokens"));  // greedy: no draw, so no seed to give
    require_one_line_error(run_cli(dir, args + " --seed 1"), "--seed has no effect with --temperature 0");
    REQUIRE(generated.at("tokens").size() == 12);
    std::string continuation;
    for (const json& token : generated.at("tokens")) {
      CHECK(token.at("log_prob").get<double>() <= 0);
      continuation += token.at("text").get<std::string>();
    }
    CHECK(generated.at("text") == "a fox" + continuation);
  }
}

TEST_CASE("train: lm words tokenizer trains and generates whole words") {
  TempDir dir("tapegrad_test_lm_cli");
  const std::string text = dir.file("corpus.txt", corpus(120)), out = dir / "run";
  const Result trained =
      run_cli(dir, cat("train --task lm --tokenizer words --data ", quote(text), kSmallLm, " --steps 20 --out ", quote(out)));
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  CHECK_THAT(trained.err, Catch::Contains("tokens (words)"));
  const json generated = last_json_line(
      run_cli(dir, cat("generate --checkpoint ", quote(out), " --prompt 'the dog' --max-new-tokens 5 --json")));
  CHECK(generated.at("text").get<std::string>().rfind("the dog ", 0) == 0);  // words joined by spaces
}

TEST_CASE("train: lm --tie-embeddings saves one table under both names, and resumes tied") {
  TempDir dir("tapegrad_test_lm_cli");
  const std::string text = dir.file("corpus.txt", corpus(80));
  const std::string args = cat("train --task lm --tie-embeddings --positional rope --data ", quote(text), kSmallLm);
  REQUIRE(run_cli(dir, cat(args, " --steps 20 --out ", quote(dir / "whole"))).exit_code == 0);
  REQUIRE(run_cli(dir, cat(args, " --steps 10 --out ", quote(dir / "parts"))).exit_code == 0);
  const Result resumed = run_cli(dir, cat("train --resume ", quote(dir / "parts"), " --steps 20"));
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(read_file(dir / "whole/model.safetensors") == read_file(dir / "parts/model.safetensors"));
  CHECK(json::parse(read_file(dir / "whole/config.json")).at("tie_embeddings") == true);
  const std::string weights = read_file(dir / "whole/model.safetensors");
  CHECK(weights.find("\"embed.weight\"") != std::string::npos);
  CHECK(weights.find("\"head.weight\"") != std::string::npos);
  const json scored =
      last_json_line(run_cli(dir, cat("eval --checkpoint ", quote(dir / "whole"), " --data ", quote(text), " --json")));
  CHECK(std::isfinite(scored.at("loss").get<double>()));
}

TEST_CASE("train: lm bpe tokenizer learnt from the text is kept in the run, and its model serves another run") {
  TempDir dir("tapegrad_test_lm_cli");
  const std::string text = dir.file("corpus.txt", corpus(200)), out = dir / "run";
  const Result trained = run_cli(
      dir, cat("train --task lm --tokenizer bpe --vocab-size 60 --data ", quote(text), kSmallLm, " --steps 10 --out ", quote(out)));
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  CHECK_THAT(trained.err, Catch::Contains("60 tokens (bpe)"));
  CHECK(fs::exists(fs::path(out) / "tokenizer.model"));  // SentencePiece's own file, beside tokenizer.json
  const json generated = last_json_line(
      run_cli(dir, cat("generate --checkpoint ", quote(out), " --prompt 'the café' --max-new-tokens 8 --json")));
  CHECK(generated.at("text").get<std::string>().rfind("the café", 0) == 0);
  const Result reused = run_cli(dir, cat("train --task lm --tokenizer bpe --tokenizer-model ", quote(out + "/tokenizer.model"),
                                         " --data ", quote(text), kSmallLm, " --steps 2 --out ", quote(dir / "again")));
  INFO(reused.err);
  REQUIRE(reused.exit_code == 0);
  CHECK(read_file(out + "/tokenizer.json") == read_file(dir / "again/tokenizer.json"));
}

TEST_CASE("train: lm bad inputs get one line on stderr and a non-zero exit") {
  TempDir dir("tapegrad_test_lm_cli");
  const std::string text = dir.file("corpus.txt", corpus(60)), lm = dir / "lm";
  REQUIRE(run_cli(dir, cat("train --task lm --data ", quote(text), kSmallLm, " --steps 2 --out ", quote(lm))).exit_code == 0);
  const std::string classifier = train_keyword_model(dir);
  const std::string empty = quote(dir.file("empty.txt", "")), blank = quote(dir.file("blank.txt", " \n\n\t\n"));
  const std::string binary = quote(dir.file("binary.txt", std::string("PK\x03\x04\0\0binary", 12)));
  const std::string latin1 = quote(dir.file("latin1.txt", "caf\xe9 au lait\n"));
  const std::string one_char = quote(dir.file("one.txt", "x"));
  const std::string out = " --out " + quote(dir / "new");
  const std::string generate = cat("generate --checkpoint ", quote(lm), " --prompt 'the'");
  const std::pair<std::string, std::string> cases[] = {
      {"train --task lm" + out, "--task lm trains on a text file: give --data"},
      {"train --task lm --data " + empty + out, "empty.txt"},
      {"train --task lm --data " + blank + out, "blank.txt"},
      {"train --task lm --data " + binary + out, "binary.txt"},
      {"train --task lm --data " + latin1 + out, "latin1.txt:1"},
      {"train --task lm --data " + one_char + out, "of the 1 token of " + (dir / "one.txt") + " holds out 0"},
      {"train --task lm --data " + quote(text) + " --epochs 2" + out, "--epochs does not apply to --task lm"},
      {"train --task lm --data " + quote(text) + " --pool cls" + out, "--pool does not apply to --task lm"},
      {"train --task lm --data " + quote(text) + " --init " + quote(classifier) + out, "holds a classifier"},
      {"train --data " + quote(dir / "train.tsv") + " --tokenizer words" + out, "--tokenizer applies to --task lm only"},
      {"train --task lm --tokenizer bpe --tokenizer-model " + quote(text) + " --data " + quote(text) + out,
       "corpus.txt: not a SentencePiece model"},
      {"train --task lm --tokenizer-model " + quote(text) + " --data " + quote(text) + out, "--tokenizer-model applies to --tokenizer bpe only, not characters"},
      {"train --task lm --tokenizer bpe --vocab-size 5 --data " + quote(text) + out, "--vocab-size 5 is below"},
      {"train --task lm --tokenizer bpe --vocab-size 2000 --data " + quote(text) + kSmallLm + out,
       "--vocab-size 2000: more than the "},
      {generate + " --top-p 0", "--top-p = 0 must be in (0, 1]"},
      {generate + " --temperature -1", "--temperature = -1 must be 0 (greedy) or in [0.001, 1000]"},
      {generate + " --temperature 1e30", "--temperature = 1e+30 must be 0 (greedy) or in [0.001, 1000]"},
      {generate + " --temperature 1e-4", "--temperature = 0.0001 must be 0 (greedy) or in [0.001, 1000]"},
      {generate + " --max-new-tokens 0", "--max-new-tokens must be in [1, "},
      {cat("generate --checkpoint ", quote(lm), " --prompt ", quote(std::string(30, 'a'))), "30 tokens, more than the model's context length 24"},
      {cat("generate --checkpoint ", quote(lm), " --prompt ''"), "--prompt: no token"},
      {cat("generate --checkpoint ", quote(classifier), " --prompt 'good'"), "holds a classifier, not a language model"},
      {cat("predict --checkpoint ", quote(lm), " --text 'the'"), "holds a language model"},
      {cat("eval --checkpoint ", quote(lm), " --task majority"), "holds a language model: give --data"},
      {cat("eval --checkpoint ", quote(lm), " --data ", binary), "binary.txt"},
      {cat("eval --checkpoint ", quote(lm), " --data ", one_char), "one.txt: 1 token"},
  };
  for (const auto& [args, mentions] : cases) {
    INFO("tapegrad " << args);
    require_one_line_error(run_cli(dir, args), mentions);
  }
  CHECK(!fs::exists(dir / "new"));
}
