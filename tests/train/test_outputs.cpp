// Outputs that cannot be trusted are errors: predict and eval never print a NaN or infinite logit,
// probability or loss as a result (JSON would say null, argmax a label anyway); predict reads its texts
// by the rules of every text reader; --attention-svg never overwrites a file tapegrad did not write and
// never writes an unbounded picture; eval says when texts were cut. Each refused row runs the real binary
// and is listed by name in docs/reliability.md ("Outputs that cannot be trusted are errors").
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "support/bad_input.h"
#include "support/temp_dir.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/safetensors.h"

using namespace tapegrad;
using namespace tapegrad::testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Row = BadInput;

/// A small untrained model (vocab <pad> <unk> <cls> a b c, labels neg and pos, 2 heads), written as
/// training writes a checkpoint.
std::string checkpoint(const TempDir& dir, const std::string& name, int64_t context_length = 4, int64_t layers = 1) {
  nn::ClassifierOptions o{6};
  o.d_model = 4;
  o.n_heads = 2;
  o.d_ff = 8;
  o.n_layers = layers;
  o.context_length = context_length;
  o.num_classes = 2;
  o.dropout = 0;
  Generator init(5);
  nn::SequenceClassifier model(o, init, nullptr);
  const Vocab vocab = Vocab::build({"a b c"});
  const std::vector<std::string> labels = {"neg", "pos"};
  const std::string folder = dir / name;
  write_checkpoint_folder(folder, {&model, model_config_json(model.options()), &vocab, &labels, nullptr, json()});
  return folder;
}

/// Every weight multiplied by `factor` (finite, so load_model accepts them).
void scale_weights(const std::string& folder, double factor) {
  nn::NamedTensors weights = load_safetensors(folder + "/model.safetensors").tensors;
  for (auto& [name, w] : weights) w = w * factor;
  save_safetensors(folder + "/model.safetensors", weights);
}

void set_config(const std::string& folder, const std::string& key, const json& value) {
  json config = json::parse(read_file(folder + "/config.json"));
  config[key] = value;
  std::ofstream(folder + "/config.json") << config.dump();
}

std::vector<Row> non_finite_rows(const std::string& huge, const std::string& hot, const std::string& denormal,
                                 const std::string& data) {
  return {{
      {"predict with weights whose forward overflows", "predict --checkpoint " + huge + " --text 'a b'",
       "the logits of text 1 are not finite"},
      {"predict --json with weights whose forward overflows", "predict --json --checkpoint " + huge + " --text 'a b'",
       "from finite weights of norm"},
      {"predict from stdin with weights whose forward overflows", "predict --checkpoint " + huge, "the float32 forward overflows",
       "a\nb c\n"},
      {"eval with weights whose forward overflows", "eval --checkpoint " + huge + " --data " + data,
       "the logits of example 1 are not finite"},
      {"eval --json with weights whose forward overflows", "eval --json --checkpoint " + huge + " --data " + data,
       "are not finite ('"},
      {"config.json temperature 1e-300", "predict --checkpoint " + hot + " --text a",
       "config.json: attention.temperature must be a finite number in [0.001, 1000], got 1e-300"},
      {"config.json temperature 1e-300 in eval", "eval --checkpoint " + hot + " --data " + data,
       "config.json: attention.temperature must be a finite number in [0.001, 1000], got 1e-300"},
      {"config.json temperature 1e-45", "predict --json --checkpoint " + denormal + " --text a",
       "config.json: attention.temperature must be a finite number in [0.001, 1000], got 1e-45"},
  }};
}

std::vector<Row> text_rows(const std::string& run) {
  const std::string predict = "predict --checkpoint " + run, json_predict = "predict --json --checkpoint " + run;
  return {{
      {"predict stdin invalid UTF-8", predict, "stdin:2: invalid UTF-8 at byte 3 of the line", "a b\nc \xff\n"},
      {"predict --json stdin invalid UTF-8", json_predict, "stdin:1: invalid UTF-8 at byte 1 of the line", "\xc3(\n"},
      {"predict stdin NUL byte", predict, "stdin:1: NUL byte at byte 2 of the line", std::string("a\0b\n", 4)},
      {"predict stdin CR-only line ends", predict, "stdin:1: carriage return without a line feed at byte 2", "a\rb\rc"},
      {"predict stdin of only blank lines", predict, "no texts", "\n  \r\n\t\n"},
      {"predict --text empty", predict + " --text ''", "--text number 1: empty text"},
      {"predict --text of only spaces", predict + " --text a --text '   '", "--text number 2: empty text"},
      {"predict --text invalid UTF-8", json_predict + " --text " + quote("a \xed\xa0\x80"),
       "--text number 1: invalid UTF-8 at byte 3 of the text"},
  }};
}

std::vector<Row> attention_rows(const std::string& run, const std::string& long_run, const std::string& foreign_svg,
                                const std::string& folder_svg, const std::string& long_text) {
  const std::string predict = "predict --checkpoint " + run + " --text 'a b' --attention-svg ";
  return {{
      {"--attention-svg naming model.safetensors", predict + run + "/model.safetensors", "does not end in .svg"},
      {"--attention-svg naming config.json", predict + run + "/config.json", "does not end in .svg"},
      {"--attention-svg naming an SVG tapegrad did not write", predict + foreign_svg,
       "exists and is not an attention map tapegrad wrote; refusing to overwrite it"},
      {"--attention-svg naming a directory", predict + folder_svg, "is a directory"},
      {"--attention-svg with a text longer than the map's limit",
       "predict --checkpoint " + long_run + " --text " + quote(long_text) + " --attention-svg pic.svg",
       "text 1 has 800 tokens, more than the 724 an attention map of this model's 1 layers x 2 heads draws"},
  }};
}

}  // namespace

TEST_CASE("outputs: predict and eval refuse outputs that are not finite, naming the checkpoint and the cause") {
  TempDir dir("tapegrad_test_outputs");
  const std::string huge = checkpoint(dir, "huge"), hot = checkpoint(dir, "hot"), denormal = checkpoint(dir, "denormal");
  scale_weights(huge, 1e30);
  set_config(hot, "settings", {{"attention", {{"causal", false}, {"temperature", 1e-300}}}, {"norm", {{"eps", 1e-5}}}});
  set_config(denormal, "settings", {{"attention", {{"causal", false}, {"temperature", 1e-45}}}, {"norm", {{"eps", 1e-5}}}});
  const std::string data = dir.file("data.tsv", "pos\ta b\nneg\tc\n");
  require_refused(dir, non_finite_rows(quote(huge), quote(hot), quote(denormal), quote(data)));
  // The same checkpoint with its weights as trained gives finite results.
  const std::string fine = checkpoint(dir, "fine");
  const Result r = run_cli(dir, "eval --json --checkpoint " + quote(fine) + " --data " + quote(data));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(std::isfinite(json::parse(r.out).at("loss").get<double>()));
}

TEST_CASE("outputs: predict reads stdin and --text by the rules of every text reader") {
  TempDir dir("tapegrad_test_outputs");
  const std::string run = checkpoint(dir, "run");
  require_refused(dir, text_rows(quote(run)));
  // Accepted: a byte order mark, CRLF line ends (and a last CR without its LF), blank lines skipped.
  const Result r = run_cli(dir, "predict --json --checkpoint " + quote(run), "\xef\xbb\xbf" "a b\r\n\r\n   \nc\r");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == 2);
  CHECK(json::parse(lines[0]).at("text") == "a b");
  CHECK(json::parse(lines[1]).at("text") == "c");
}

TEST_CASE("outputs: --attention-svg never overwrites a file tapegrad did not write, and its size is bounded") {
  TempDir dir("tapegrad_test_outputs");
  const std::string run = checkpoint(dir, "run"), long_run = checkpoint(dir, "long", 1000);
  const std::string foreign_svg = dir.file("notes.svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"><text>mine</text></svg>\n");
  const std::string folder_svg = dir / "pictures.svg";
  fs::create_directory(folder_svg);
  std::string long_text;
  for (int i = 0; i < 800; ++i) long_text += i ? " a" : "a";
  const std::string weights = read_file(run + "/model.safetensors"), config = read_file(run + "/config.json");
  require_refused(dir, attention_rows(quote(run), quote(long_run), quote(foreign_svg), quote(folder_svg), long_text));
  CHECK(read_file(run + "/model.safetensors") == weights);
  CHECK(read_file(run + "/config.json") == config);
  CHECK(read_file(foreign_svg).find("mine") != std::string::npos);
  CHECK(!fs::exists(dir / "pic.svg"));

  // An attention map tapegrad wrote is replaced; a text at the limit is drawn.
  const std::string map = dir / "attention.svg";
  for (const std::string text : {"a b", "c"}) {
    const Result r = run_cli(dir, "predict --checkpoint " + quote(run) + " --text " + quote(text) + " --attention-svg " + quote(map));
    INFO(r.err);
    CHECK(r.exit_code == 0);
  }
  CHECK(read_file(map).find("attention: c") != std::string::npos);
  const std::string at_limit = long_text.substr(0, 724 * 2 - 1);
  const Result r = run_cli(dir, "predict --checkpoint " + quote(long_run) + " --text " + quote(at_limit) +
                                    " --attention-svg " + quote(dir / "long.svg"));
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(fs::file_size(dir / "long.svg") < (uint64_t{64} << 20) * 11 / 10);
}

TEST_CASE("outputs: eval says how many texts were cut to the context length") {
  TempDir dir("tapegrad_test_outputs");
  const std::string run = checkpoint(dir, "run");  // context 4
  const std::string data = dir.file("data.tsv", "pos\ta b\nneg\ta b c a b c\npos\tc c c c c\nneg\tb\n");
  const Result plain = run_cli(dir, "eval --checkpoint " + quote(run) + " --data " + quote(data));
  INFO(plain.err);
  REQUIRE(plain.exit_code == 0);
  CHECK_THAT(plain.err, Catch::Contains("note: 2 of the 4 texts were cut to the context length 4"));
  CHECK_THAT(plain.out, Catch::Contains("truncated 2"));
  const Result as_json = run_cli(dir, "eval --json --checkpoint " + quote(run) + " --data " + quote(data));
  REQUIRE(as_json.exit_code == 0);
  CHECK(json::parse(as_json.out).at("truncated") == 2);
  CHECK_THAT(as_json.err, Catch::Contains("note: 2 of the 4 texts were cut"));
  const std::string short_data = dir.file("short.tsv", "pos\ta b\nneg\tc\n");
  const Result none = run_cli(dir, "eval --checkpoint " + quote(run) + " --data " + quote(short_data));
  CHECK(none.err.empty());
}

TEST_CASE("outputs: results that cannot be written to stdout are an error, not a silent exit 0") {
  TempDir dir("tapegrad_test_outputs");
  const std::string run = checkpoint(dir, "run");
  const std::string data = dir.file("data.tsv", "pos\ta b\nneg\tc\n");
  for (const std::string& args : {"predict --checkpoint " + quote(run) + " --text 'a b'",
                                  "predict --json --checkpoint " + quote(run) + " --text 'a b'",
                                  "eval --checkpoint " + quote(run) + " --data " + quote(data),
                                  "eval --json --checkpoint " + quote(run) + " --data " + quote(data), std::string("--help"),
                                  std::string("generate --help"), std::string("train --help")}) {
    INFO(args);
    // /dev/full: every write fails with ENOSPC, as on a full disk
    const Result r = run_shell(dir, cat("timeout 60 ", tapegrad_command(), " ", args, " > /dev/full"));
    require_one_line_error(r, "stdout: could not write the results");
  }
  // train's results come after the work: the failed write is its last line, and no line before it says the
  // run finished or where its checkpoint is.
  const Result trained = run_shell(dir, cat("timeout 60 ", tapegrad_command(), " train --json --steps 5 --eval-every 5 --out ",
                                            quote(dir / "trained"), " > /dev/full"));
  INFO(trained.err);
  CHECK(trained.exit_code == 1);
  REQUIRE(!lines_of(trained.err).empty());
  CHECK_THAT(lines_of(trained.err).back(), Catch::Contains("stdout: could not write the results (No space left on device)"));
  CHECK_THAT(trained.err, !Catch::Contains("finished after") && !Catch::Contains("checkpoint:"));
}

TEST_CASE("outputs: docs/reliability.md lists every row of this file") {
  std::vector<Row> rows = non_finite_rows("", "", "", "");
  for (const auto& table : {text_rows(""), attention_rows("", "", "", "", "")}) rows.insert(rows.end(), table.begin(), table.end());
  require_documented(rows);
}
