// A language model's surfaces as a user meets them (docs/reliability.md, "A language model's run"): its
// tokenizer is checked like its weights by every command that reads the checkpoint, generation works at every
// context a run can be trained with, and every command the CLI suggests runs as printed.
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "support/cli.h"
#include "support/temp_dir.h"

using namespace tapegrad;
using namespace tapegrad::testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// Words with structure, long enough for any small context.
std::string word_text() {
  const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far"};
  std::string text;
  for (int i = 0; i < 600; ++i) text += std::string(words[(i * 7 + i / 3) % 10]) + (i % 11 == 10 ? "\n" : " ");
  return text;
}

/// A language model trained for a few steps into dir/name; the Result of its train command.
Result train_lm(const TempDir& dir, const std::string& name, const std::string& flags) {
  const std::string text = dir.file("text.txt", word_text());
  return run_cli(dir, cat("train --task lm --data ", quote(text), " --d-model 8 --heads 2 --ff 16 --layers 1 ",
                          "--batch-size 4 --steps 3 --eval-every 3 --out ", quote(dir / name), " ", flags));
}

/// tokenizer.json of run `name` with its token entries i and j exchanged, written over the published file.
void swap_tokens(const TempDir& dir, const std::string& name, size_t i, size_t j) {
  const std::string path = fs::canonical(dir / name + "/tokenizer.json").string();
  json tokenizer = json::parse(read_file(path));
  std::swap(tokenizer.at("tokens").at(i), tokenizer.at("tokens").at(j));
  fs::remove(path);
  std::ofstream(path) << tokenizer.dump();
}

/// The command after "try: " on the last such line of stderr.
std::string suggested(const Result& r) {
  for (const std::string& line : lines_of(r.err))
    if (line.starts_with("try: ")) return line.substr(5);
  return "";
}

/// The commands a refusal suggests: every `...` of its stderr that starts with the program.
std::vector<std::string> hinted(const Result& r) {
  std::vector<std::string> commands;
  const std::regex quoted("`([^`]*)`");
  for (auto it = std::sregex_iterator(r.err.begin(), r.err.end(), quoted); it != std::sregex_iterator(); ++it) {
    const std::string command = (*it)[1];
    if (command.starts_with(tapegrad_command()) || command.starts_with(TAPEGRAD_CLI)) commands.push_back(command);
  }
  return commands;
}

/// Runs every command refusal `r` suggests (at least `expected` of them), each to exit 0 with output.
void check_hints_run(const TempDir& dir, const Result& r, size_t expected) {
  INFO("refusal: " << r.err);
  CHECK(r.exit_code == 1);
  const std::vector<std::string> commands = hinted(r);
  CHECK(commands.size() >= expected);
  for (const std::string& command : commands) {
    const Result hint = run_shell(dir, command + " </dev/null");
    INFO("hint: " << command << "\nstdout: " << hint.out << "\nstderr: " << hint.err);
    CHECK(hint.exit_code == 0);
    CHECK(!(hint.out + hint.err).empty());
  }
}

}  // namespace

TEST_CASE("train: lm a checkpoint's tokenizer is checked like its weights by resume, init, eval and generate") {
  TempDir dir("tapegrad_test_lm_surfaces");
  const std::string text = quote(dir / "text.txt");
  for (const std::string tokenizer : {"characters", "words"}) {
    INFO("--tokenizer " << tokenizer);
    const std::string run = "run_" + tokenizer;
    REQUIRE(train_lm(dir, run, "--tokenizer " + tokenizer + " --context-length 8").exit_code == 0);
    const json config = json::parse(read_file(dir / run + "/config.json"));
    REQUIRE(config.at("tokenizer_digest").is_string());
    // Two entries exchanged: a characters tokenizer out of its code-point order, a words one (whose order
    // is the text's) by its digest. Every reader names the file.
    swap_tokens(dir, run, 1, 2);
    const std::string before = read_file(dir / run + "/model.safetensors");
    const std::string refused = tokenizer == "characters" ? "code-point order" : "not the tokenizer this model was trained with";
    for (const std::string& args :
         {cat("train --resume ", quote(dir / run), " --steps 6"),
          cat("train --task lm --data ", text, " --init ", quote(dir / run), " --steps 1 --out ", quote(dir / "new")),
          cat("eval --checkpoint ", quote(dir / run), " --data ", text),
          cat("generate --checkpoint ", quote(dir / run), " --prompt the --max-new-tokens 2")}) {
      INFO("tapegrad " << args);
      const Result r = run_cli(dir, args);
      require_one_line_error(r, run + "/tokenizer.json: ");
      CHECK_THAT(r.err, Catch::Contains(refused));
    }
    CHECK(read_file(dir / run + "/model.safetensors") == before);  // the refused resume changed nothing
    CHECK(!fs::exists(dir / "new"));
    // A checkpoint from before the digest (no key) still loads: the tokenizer is put back, the key removed.
    swap_tokens(dir, run, 1, 2);
    json older = config;
    older.erase("tokenizer_digest");
    const std::string config_path = fs::canonical(dir / run + "/config.json").string();
    fs::remove(config_path);
    std::ofstream(config_path) << older.dump(2);
    const Result r = run_cli(dir, cat("generate --checkpoint ", quote(dir / run), " --prompt the --max-new-tokens 2"));
    INFO(r.err);
    CHECK(r.exit_code == 0);
  }
  // A digest that is not one is refused by key.
  const std::string config_path = fs::canonical(dir / "run_words/config.json").string();
  json bad = json::parse(read_file(config_path));
  bad["tokenizer_digest"] = "not hex";
  fs::remove(config_path);
  std::ofstream(config_path) << bad.dump(2);
  require_one_line_error(run_cli(dir, cat("eval --checkpoint ", quote(dir / "run_words"), " --data ", text)),
                         "'tokenizer_digest' must be 16 lowercase hex digits");
}

TEST_CASE("train: lm generation works at every context length a run can be trained with") {
  TempDir dir("tapegrad_test_lm_surfaces");
  for (const int context : {1, 2, 3, 4, 5}) {
    INFO("--context-length " << context);
    const std::string run = cat("run_", context);
    REQUIRE(train_lm(dir, run, cat("--tokenizer words --context-length ", context)).exit_code == 0);
    // Far past the context, so that the window restarts several times; the cache gives the text recomputing does.
    const std::string generate =
        cat("generate --checkpoint ", quote(dir / run), " --prompt the --max-new-tokens ", 3 * context + 4, " --seed 5");
    const Result cached = run_cli(dir, generate), recomputed = run_cli(dir, generate + " --no-cache");
    INFO(cached.err << recomputed.err);
    REQUIRE(cached.exit_code == 0);
    REQUIRE(recomputed.exit_code == 0);
    CHECK(cached.out == recomputed.out);
    CHECK(lines_of(cached.out).size() >= 1);
  }
}

TEST_CASE("train: every command train's try: line and a refusal's hint suggest runs as printed") {
  TempDir dir("tapegrad_test_lm_surfaces");
  // A run folder whose name needs quoting, for the classifier and for language models of small contexts.
  const std::string tsv = dir.file("train.tsv", keyword_tsv(200, 1));
  std::vector<Result> runs = {run_cli(dir, cat("train --data ", quote(tsv), " --context-length 8 --steps 20 --eval-every 20 --out ",
                                               quote(dir / "it's a classifier")))};
  for (const std::string tokenizer : {"characters", "words"})
    for (const int context : {1, 2, 3, 8})
      runs.push_back(train_lm(dir, cat("it's run ", tokenizer, " ", context),
                              cat("--tokenizer ", tokenizer, " --context-length ", context)));
  for (const Result& run : runs) {
    INFO("train's stderr: " << run.err);
    REQUIRE(run.exit_code == 0);
    const std::string command = suggested(run);
    REQUIRE(!command.empty());
    CHECK((command.starts_with(tapegrad_command()) || command.starts_with(TAPEGRAD_CLI)));
    const Result r = run_shell(dir, command);
    INFO("try: " << command << "\nstdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(!r.out.empty());
  }
  // The hints of refusals: the other kind's command (with the user's text, or without one: stdin), --out of a
  // finished run, --resume of its best/.
  const std::string classifier = quote(dir / "it's a classifier");
  check_hints_run(dir, run_cli(dir, cat("generate --checkpoint ", classifier, " --prompt 'the cat'")), 1);
  check_hints_run(dir, run_cli(dir, cat("generate --checkpoint ", classifier, " --prompt ' '")), 1);
  for (const std::string tokenizer : {"characters", "words"})
    for (const int context : {1, 8}) {
      const std::string run = quote(dir / cat("it's run ", tokenizer, " ", context));
      check_hints_run(dir, run_cli(dir, cat("predict --checkpoint ", run, " --text 'the cat sat on the mat and ran far'")), 2);
      check_hints_run(dir, run_cli(dir, cat("predict --checkpoint ", run, " </dev/null")), 2);
      check_hints_run(dir, run_cli(dir, cat("train --task lm --data ", quote(dir / "text.txt"), " --out ", run)), 1);
      check_hints_run(dir, run_cli(dir, cat("train --resume ", quote(dir / cat("it's run ", tokenizer, " ", context, "/best")))), 1);
    }
}

TEST_CASE("train: lm generate refuses a checkpoint whose logits overflow before writing any text") {
  TempDir dir("tapegrad_test_lm_surfaces");
  REQUIRE(train_lm(dir, "run", "--tokenizer words --context-length 4").exit_code == 0);
  // The head scaled to ±3e38, finite in float32: every logit overflows to ±inf.
  const std::string weights = fs::canonical(dir / "run/model.safetensors").string();
  std::string bytes = read_file(weights);
  const uint64_t header = *reinterpret_cast<const uint64_t*>(bytes.data());
  const json index = json::parse(bytes.substr(8, header));
  const auto offsets = index.at("head.weight").at("data_offsets");
  for (size_t at = 8 + header + offsets[0].get<size_t>(); at < 8 + header + offsets[1].get<size_t>(); at += 4) {
    const float huge = (at / 4) % 2 ? 3e38f : -3e38f;
    std::memcpy(bytes.data() + at, &huge, 4);
  }
  fs::remove(weights);
  std::ofstream(weights, std::ios::binary) << bytes;
  const Result r = run_cli(dir, cat("generate --checkpoint ", quote(dir / "run"), " --prompt the"));
  require_one_line_error(r, "run: the logits of new token 1 are not finite");
  CHECK_THAT(r.err, Catch::Contains("head.weight") && Catch::Contains("forward overflows"));
}

TEST_CASE("train: lm generate never writes <unk>, and says so when the prompt holds characters the tokenizer lacks") {
  TempDir dir("tapegrad_test_lm_surfaces");
  REQUIRE(train_lm(dir, "run", "--context-length 8").exit_code == 0);
  for (int seed = 0; seed < 5; ++seed) {
    const Result r = run_cli(dir, cat("generate --checkpoint ", quote(dir / "run"),
                                      " --prompt the --max-new-tokens 60 --temperature 3 --json --seed ", seed));
    REQUIRE(r.exit_code == 0);
    const json generated = json::parse(r.out);  // a range-for over parse(...).at(...) would outlive the parsed value
    for (const json& token : generated.at("tokens")) CHECK(token.at("id") != 0);
  }
  const Result r = run_cli(dir, cat("generate --checkpoint ", quote(dir / "run"), " --prompt 'thé' --max-new-tokens 2"));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("note: --prompt: 1 of its 3 tokens are not in the checkpoint's tokenizer"));
}

TEST_CASE("train: lm generate to a full disk fails before its summary line") {
  TempDir dir("tapegrad_test_lm_surfaces");
  REQUIRE(train_lm(dir, "run", "--context-length 8").exit_code == 0);
  for (const std::string json_flag : {"", " --json"}) {
    const Result r = run_shell(
        dir, cat(tapegrad_command(), " generate --checkpoint ", quote(dir / "run"), " --prompt the --max-new-tokens 20",
                 json_flag, " >/dev/full"));
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(lines_of(r.err).size() == 1);
    CHECK_THAT(r.err, Catch::Contains("stdout: could not write the generated text") && !Catch::Contains("tokens/s"));
  }
}

TEST_CASE("train: lm a real setting float32 cannot hold is refused by train, and in config.json by generate and eval") {
  TempDir dir("tapegrad_test_lm_surfaces");
  require_one_line_error(train_lm(dir, "refused", "--norm-eps 1e300"), "--norm-eps: 1e300 is infinite in float32");
  CHECK(!fs::exists(dir / "refused"));
  REQUIRE(train_lm(dir, "run", "--context-length 8").exit_code == 0);
  const std::string path = fs::canonical(dir / "run/config.json").string();
  for (const double eps : {1e300, 2.0, 1e-45}) {  // infinite in float32, past its declared range, 0 in float32
    INFO("norm.eps " << eps);
    json config = json::parse(read_file(path));
    config["settings"]["norm"]["eps"] = eps;
    fs::remove(path);
    std::ofstream(path) << config.dump();
    require_one_line_error(run_cli(dir, cat("generate --checkpoint ", quote(dir / "run"), " --prompt the")),
                           "config.json: norm.eps");
    require_one_line_error(run_cli(dir, cat("eval --checkpoint ", quote(dir / "run"), " --data ", quote(dir / "text.txt"))),
                           "config.json: norm.eps");
  }
}

TEST_CASE("train: lm --causal, which every language model is, is refused as a flag without effect") {
  TempDir dir("tapegrad_test_lm_surfaces");
  require_one_line_error(train_lm(dir, "run", "--causal"), "--causal has no effect with --task lm");
  CHECK(!fs::exists(dir / "run"));
}

TEST_CASE("train: a refused flag's hint names the program as it was started") {
  TempDir dir("tapegrad_test_lm_surfaces");
  const Result r = run_cli(dir, "train --steps 1.5");
  require_one_line_error(r, " train --help)");
  CHECK_THAT(r.err, Catch::Contains(cat("(see ", TAPEGRAD_CLI)) || Catch::Contains(cat("(see ", tapegrad_command())));
}
