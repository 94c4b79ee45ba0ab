// The tapegrad command line, run as a real process (its flags: test_cli_flags.cpp): one-line errors with a
// non-zero exit for bad flags, values and files, `train --json`, a TSV round trip through train,
// predict and eval (unknown words, over-long lines, stdin), the attention SVG and `gradcheck --json`.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "autograd/error.h"
#include "autograd/random.h"
#include "support/cli.h"
#include "support/temp_dir.h"
#include "train/checkpoint/checkpoint.h"
#include "train/cli/bench.h"

using namespace tapegrad;
using testing::TempDir;
using namespace testing;
namespace fs = std::filesystem;
using nlohmann::json;

TEST_CASE("train: cli missing and malformed files get one line on stderr and a non-zero exit") {
  TempDir dir("tapegrad_test_cli");
  const std::string out = " --out " + quote(dir / "run");
  const std::string missing = quote(dir / "missing.tsv");
  const std::string no_tab = quote(dir.file("no_tab.tsv", "pos\tgood film\nneg bad film\n"));
  const std::string bad_utf8 = quote(dir.file("bad_utf8.tsv", "pos\tgood \xff film\n"));
  const std::string good = quote(dir.file("good.tsv", "pos\tgood film\nneg\tbad film\n"));
  const std::string empty = quote(dir.file("empty.tsv", "\n\n"));
  const std::string one_class_valid = quote(dir.file("valid.tsv", "meh\tgood film\n"));
  const std::string nowhere = quote(dir / "no_such_run");
  const std::pair<std::string, std::string> before_training[] = {
      {"train --data " + missing + out, "missing.tsv"},
      {"train --data " + no_tab + out, "no_tab.tsv:2"},
      {"train --data " + bad_utf8 + out, "bad_utf8.tsv:1"},
      {"train --data " + empty + out, "empty.tsv"},
      {"train --data " + good + " --valid " + missing + out, "missing.tsv"},
      {"train --resume " + nowhere, "no_such_run"},
      {"train --init " + nowhere + out, "no_such_run"},
      {"eval --checkpoint " + nowhere + " --task majority", "no_such_run"},
      {"predict --checkpoint " + nowhere + " --text 'a b'", "no_such_run"},
  };
  for (const auto& [args, mentions] : before_training) {
    INFO("tapegrad " << args);
    require_one_line_error(run_cli(dir, args), mentions);
  }

  // Files that only a trained checkpoint can be wrong about.
  const std::string run = train_keyword_model(dir);
  const std::string broken = dir / "broken";
  fs::create_directories(broken);
  for (const char* file : {"config.json", "vocab.txt", "labels.txt", "model.safetensors"})
    fs::copy_file(fs::path(run) / file, fs::path(broken) / file);
  const std::string weights = read_file(broken + "/model.safetensors");
  std::ofstream(broken + "/model.safetensors", std::ios::binary | std::ios::trunc)
      << weights.substr(0, weights.size() / 2);
  const std::string no_config = dir / "no_config";
  fs::create_directories(no_config);
  fs::copy_file(fs::path(run) / "model.safetensors", fs::path(no_config) / "model.safetensors");
  const std::pair<std::string, std::string> after_training[] = {
      {"predict --checkpoint " + quote(broken) + " --text 'good film'", "model.safetensors"},
      {"eval --checkpoint " + quote(broken) + " --data " + quote(run + "/../train.tsv"), "model.safetensors"},
      {"predict --checkpoint " + quote(no_config) + " --text 'good film'", "config.json"},
      {"eval --checkpoint " + quote(run) + " --data " + no_tab, "no_tab.tsv:2"},
      {"eval --checkpoint " + quote(run) + " --data " + missing, "missing.tsv"},
      {"eval --checkpoint " + quote(run) + " --data " + one_class_valid, "meh"},  // a label the model lacks
      {"train --init " + quote(run) + " --task majority --overwrite" + out, "labels"},
      {"train --task majority" + out, "--overwrite"},
      {"predict --checkpoint " + quote(run) + " --text 'good film' --attention-svg " + quote(dir / "no/dir/a.svg"),
       "a.svg"},
      {"predict --checkpoint " + quote(run), "no texts"},  // empty stdin
  };
  for (const auto& [args, mentions] : after_training) {
    INFO("tapegrad " << args);
    require_one_line_error(run_cli(dir, args), mentions);
  }
}

TEST_CASE("train: cli a value the library refuses is named by its flag") {
  TempDir dir("tapegrad_test_cli");
  const std::string out = " --out " + quote(dir / "run");
  // The flags whose library field has another name (validate() names fields, the command line its flags).
  const std::pair<std::string, std::string> refused[] = {
      {"train --ff 0", "--ff must be in [1, "},
      {"train --layers -1", "--layers must be in [0, "},
      {"train --heads 64", "--heads must be in [1, --d-model = 32], got 64"},
      {"train --log-every 0", "--log-every must be positive, got 0"},
      {"train --threads 5000", "--threads must be in [0, "},
      {"train --train-size 10 --steps 5 --epochs 2", "give --steps or --epochs, not both"},
  };
  for (const auto& [args, mentions] : refused) {
    INFO("tapegrad " << args);
    const Result r = run_cli(dir, args + out);
    require_one_line_error(r, mentions);
    CHECK_THAT(r.err, !Catch::Contains("TrainOptions"));
  }
  CHECK(!fs::exists(dir / "run"));
}

TEST_CASE("train: cli train --json prints one JSON line with the documented keys") {
  TempDir dir("tapegrad_test_cli");
  const std::string out = dir / "run";
  const Result r = run_cli(dir, "train --task majority --steps 20 --eval-every 10 --json --out " + quote(out));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == 1);
  const json summary = json::parse(lines[0]);
  REQUIRE(summary.is_object());
  for (const char* key : {"steps", "seconds", "train_seconds", "validation_seconds", "checkpoint_seconds",
                          "train_steps_per_second", "final_valid_accuracy", "final_valid_loss", "best_valid_accuracy",
                          "best_valid_loss", "parameters", "out"})
    CHECK(summary.contains(key));
  CHECK(summary.at("steps") == 20);
  // Every moment of the run is charged to one of training, validation and checkpoints, within the total.
  const auto seconds = [](const json& j, const char* key) { return j.at(key).get<double>(); };
  const auto require_timing = [&](const json& j) {
    INFO(j.dump());
    CHECK(seconds(j, "train_seconds") > 0);
    CHECK(seconds(j, "validation_seconds") > 0);
    CHECK(seconds(j, "checkpoint_seconds") > 0);
    CHECK(seconds(j, "train_seconds") + seconds(j, "validation_seconds") + seconds(j, "checkpoint_seconds") <=
          seconds(j, "seconds"));
    CHECK(seconds(j, "train_steps_per_second") == Approx(j.at("steps").get<double>() / seconds(j, "train_seconds")));
  };
  require_timing(summary);
  const double accuracy = summary.at("final_valid_accuracy").get<double>();
  CHECK((accuracy >= 0 && accuracy <= 1));
  CHECK(summary.at("best_valid_accuracy").get<double>() >= accuracy);
  CHECK(std::isfinite(summary.at("final_valid_loss").get<double>()));
  CHECK(std::isfinite(summary.at("best_valid_loss").get<double>()));
  CHECK(summary.at("out") == out);
  CHECK(summary.at("parameters").get<int64_t>() == load_model(out).model->parameter_count());
  CHECK_THAT(r.err, Catch::Contains("validation accuracy"));

  // --resume --json continues to a new total and reports it the same way.
  const Result resumed = run_cli(dir, "train --resume " + quote(out) + " --steps 30 --json");
  INFO("resume stderr: " << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  REQUIRE(lines_of(resumed.out).size() == 1);
  const json resumed_summary = json::parse(resumed.out);
  CHECK(resumed_summary.at("steps") == 30);
  require_timing(resumed_summary);  // over both sessions
  CHECK(seconds(resumed_summary, "train_seconds") > seconds(summary, "train_seconds"));
  CHECK_THAT(resumed.err, Catch::Contains("training") && Catch::Contains("validation") && Catch::Contains("checkpoints"));
}

TEST_CASE("train: cli --verbose names the threads and the BLAS kernels in use, and --threads sets them") {
  TempDir dir("tapegrad_test_cli");
  const std::string out = dir / "run";
  const Result r = run_cli(dir, "train --task majority --steps 2 --eval-every 2 --threads 2 --verbose --out " + quote(out));
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("compute: 2 threads; BLAS ") && Catch::Contains(", kernels "));
  const Result quiet = run_cli(dir, "train --task majority --steps 2 --eval-every 2 --overwrite --out " + quote(out));
  INFO("stderr: " << quiet.err);
  REQUIRE(quiet.exit_code == 0);
  CHECK_THAT(quiet.err, !Catch::Contains("compute:"));
  const Result resumed = run_cli(dir, "train --resume " + quote(out) + " --steps 4 --verbose");
  INFO("resume stderr: " << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.err, Catch::Contains("compute: "));
}

TEST_CASE("train: cli a linear-attention model predicts, and --attention-svg says it has no weights to draw") {
  TempDir dir("tapegrad_test_cli");
  const std::string out = dir / "run";
  const Result trained = run_cli(dir, "train --task majority --attention linear --steps 2 --eval-every 2 --out " + quote(out));
  INFO("stderr: " << trained.err);
  REQUIRE(trained.exit_code == 0);
  const Result plain = run_cli(dir, "predict --checkpoint " + quote(out) + " --text " + quote("t1 t1 t2"));
  INFO("predict stderr: " << plain.err);
  CHECK(plain.exit_code == 0);
  const std::string svg = dir / "attention.svg";
  const Result r = run_cli(dir, "predict --checkpoint " + quote(out) + " --text " + quote("t1 t1 t2") +
                                    " --attention-svg " + quote(svg));
  INFO("svg stderr: " << r.err);
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("attention 'linear' computes no (T, T) attention weights"));
  CHECK_FALSE(std::filesystem::exists(svg));
}

// docs/performance.md's tolerance: gradients on 1 and 2 threads agree to float32 rounding (tests/nn), and
// Adam turns the rounding in near-zero gradients into steps of up to ±lr, so weights drift apart by a few
// learning rates while the loss stays the same to about 1e-3.
TEST_CASE("train: --threads 1 and --threads 2 train to the same loss, within 1e-3") {
  TempDir dir("tapegrad_test_cli");
  // Large enough that products and heads are split between the threads (about 0.3 GFLOP per product).
  const std::string flags = "train --task majority --steps 12 --eval-every 12 --d-model 128 --ff 512 --heads 4 --json";
  const Result one = run_cli(dir, flags + " --threads 1 --out " + quote(dir / "one"));
  const Result two = run_cli(dir, flags + " --threads 2 --out " + quote(dir / "two"));
  INFO(one.err << two.err);
  REQUIRE(one.exit_code == 0);
  REQUIRE(two.exit_code == 0);
  CHECK(json::parse(one.out).at("final_valid_loss").get<double>() ==
        Approx(json::parse(two.out).at("final_valid_loss").get<double>()).epsilon(1e-3));
}

TEST_CASE("train: cli TSV round trip: train then predict then eval") {
  TempDir dir("tapegrad_test_cli");
  Result trained;
  const std::string run = train_keyword_model(dir, &trained);
  const json summary = json::parse(trained.out);
  CHECK(summary.at("final_valid_accuracy").get<double>() >= 0.9);
  CHECK(summary.at("truncated").get<int64_t>() > 0);
  CHECK_THAT(trained.err, Catch::Contains("cut to the context length"));
  const std::vector<std::string> labels = {"neg", "pos"};
  CHECK(read_labels(run + "/labels.txt") == labels);

  SECTION("predict --json: one object per text with label, probs and logits; unknown words and long texts") {
    const std::vector<std::string> texts = {"the film was good", "the plot was bad", "good zzyzx qwerty", "xyzzy plugh",
                                            "bad the a film was very quite plot actor scene music and it the a film"};
    std::string args = "predict --json --checkpoint " + quote(run);
    for (const std::string& text : texts) args += " --text " + quote(text);
    const Result r = run_cli(dir, args);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    const std::vector<std::string> lines = lines_of(r.out);
    REQUIRE(lines.size() == texts.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      const json p = json::parse(lines[i]);
      INFO(lines[i]);
      CHECK(p.at("text") == texts[i]);
      const std::string label = p.at("label").get<std::string>();
      CHECK((label == "neg" || label == "pos"));
      double sum = 0, best = -1;
      std::string argmax;
      for (const std::string& l : labels) {
        const double prob = p.at("probs").at(l).get<double>();
        CHECK((prob >= 0 && prob <= 1));
        sum += prob;
        if (prob > best) best = prob, argmax = l;
        CHECK(std::isfinite(p.at("logits").at(l).get<double>()));
      }
      CHECK(p.at("probs").size() == 2);
      CHECK(p.at("logits").size() == 2);
      CHECK(sum == Approx(1).margin(1e-6));
      CHECK(label == argmax);
      // softmax of the logits is the probabilities
      const double z_neg = p.at("logits").at("neg").get<double>(), z_pos = p.at("logits").at("pos").get<double>();
      CHECK(p.at("probs").at("pos").get<double>() == Approx(1 / (1 + std::exp(z_neg - z_pos))).margin(1e-6));
    }
    CHECK(json::parse(lines[0]).at("label") == "pos");  // known words only: the keyword decides
    CHECK(json::parse(lines[1]).at("label") == "neg");
    CHECK(json::parse(lines[4]).at("label") == "neg");  // the keyword survives the cut to 8 words
    CHECK_THAT(r.err, Catch::Contains("text 5 was cut to the context length 8"));
    CHECK(lines_of(r.err).size() == 1);
  }
  SECTION("predict gives each text what it gives that text alone, whatever batch it lands in") {
    // Texts of 1 to 8 words: predict sorts them by length and pads each batch to its longest.
    const std::vector<std::string> texts = {"good", "the plot was bad", "bad film", "the film was very good indeed ok",
                                            "it was a good", "xyzzy", "bad the a film was very quite plot actor"};
    std::string together = "predict --json --checkpoint " + quote(run);
    for (const std::string& text : texts) together += " --text " + quote(text);
    const Result all = run_cli(dir, together);
    REQUIRE(all.exit_code == 0);
    const std::vector<std::string> lines = lines_of(all.out);
    REQUIRE(lines.size() == texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      const Result alone = run_cli(dir, "predict --json --checkpoint " + quote(run) + " --text " + quote(texts[i]));
      REQUIRE(alone.exit_code == 0);
      const json a = json::parse(lines[i]), b = json::parse(alone.out);
      INFO(lines[i] << " vs alone " << alone.out);
      CHECK(a.at("text") == b.at("text"));
      CHECK(a.at("label") == b.at("label"));
      for (const std::string& l : labels) {  // equal but for float rounding: see tests/train/test_evaluate.cpp
        CHECK(a.at("probs").at(l).get<double>() == Approx(b.at("probs").at(l).get<double>()).margin(1e-6));
        CHECK(a.at("logits").at(l).get<double>() == Approx(b.at("logits").at(l).get<double>()).margin(1e-5));
      }
    }
  }
  SECTION("predict reads one text per line from stdin") {
    const Result r = run_cli(dir, "predict --checkpoint " + quote(run), "the music was good\n\nit was bad\n");
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    const std::vector<std::string> lines = lines_of(r.out);
    REQUIRE(lines.size() == 2);  // the blank line is skipped
    CHECK(lines[0].rfind("pos\t", 0) == 0);
    CHECK_THAT(lines[0], Catch::EndsWith("\tthe music was good"));
    CHECK(lines[1].rfind("neg\t", 0) == 0);
    const Result j =
        run_cli(dir, "predict --json --checkpoint " + quote(run + "/best"), "the music was good\nit was bad\n");
    REQUIRE(j.exit_code == 0);
    REQUIRE(lines_of(j.out).size() == 2);
    CHECK(json::parse(lines_of(j.out)[1]).at("label") == "neg");
  }
  SECTION("eval --data prints loss, accuracy and the confusion matrix, and --json the same") {
    // Unseen lines with unknown words and long texts.
    std::string eval_tsv = keyword_tsv(40, 2);
    eval_tsv +=
        "pos\tgood zzyzx plugh\nneg\tbad xyzzy\npos\tgood the a film was very quite plot actor scene music and it\n";
    const std::string data = dir.file("eval.tsv", eval_tsv);
    const Result r = run_cli(dir, "eval --checkpoint " + quote(run) + " --data " + quote(data));
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("examples 43"));
    CHECK_THAT(r.out, Catch::Contains("loss"));
    CHECK_THAT(r.out, Catch::Contains("accuracy"));
    CHECK_THAT(r.out, Catch::Contains("confusion matrix"));
    const std::vector<std::string> lines = lines_of(r.out);
    REQUIRE(lines.size() == 5);  // summary, title, header, one row per label
    CHECK_THAT(lines[2], Catch::Contains("neg") && Catch::Contains("pos"));
    CHECK_THAT(lines[3], Catch::StartsWith("         neg"));
    CHECK_THAT(lines[4], Catch::StartsWith("         pos"));

    const Result j = run_cli(dir, "eval --json --checkpoint " + quote(run) + " --data " + quote(data));
    INFO("json stdout: " << j.out);
    REQUIRE(j.exit_code == 0);
    REQUIRE(lines_of(j.out).size() == 1);
    const json e = json::parse(j.out);
    CHECK(e.at("examples") == 43);
    CHECK(e.at("labels") == labels);
    CHECK(e.at("accuracy").get<double>() >= 0.9);
    CHECK(std::isfinite(e.at("loss").get<double>()));
    CHECK(e.at("truncated").get<int64_t>() > 0);
    const auto confusion = e.at("confusion").get<std::vector<std::vector<int64_t>>>();
    REQUIRE(confusion.size() == 2);
    int64_t total = 0, correct = 0;
    for (size_t t = 0; t < 2; ++t) {
      REQUIRE(confusion[t].size() == 2);
      for (size_t p = 0; p < 2; ++p) total += confusion[t][p];
      correct += confusion[t][t];
    }
    CHECK(total == 43);
    CHECK(confusion[0][0] + confusion[0][1] == 21);  // true neg: the odd lines of the 40, and "bad xyzzy"
    CHECK(static_cast<double>(correct) / 43 == Approx(e.at("accuracy").get<double>()));
  }
  SECTION("predict --attention-svg writes an SVG of the first text's attention") {
    const std::string svg = dir / "attention.svg";
    const Result r = run_cli(dir, "predict --checkpoint " + quote(run) + " --text 'the film was good' --text 'bad' " +
                                      "--attention-svg " + quote(svg));
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(lines_of(r.out).size() == 2);
    REQUIRE(fs::is_regular_file(svg));
    const std::string text = read_file(svg);
    CHECK_THAT(text, Catch::Contains("<svg"));
    CHECK_THAT(text, Catch::Contains("</svg>"));
    CHECK_THAT(text, Catch::Contains("film"));
    CHECK(!fs::exists(svg + ".tmp"));
  }
}

TEST_CASE("train: cli gradcheck --json reports zero failures") {
  TempDir dir("tapegrad_test_cli");
  const Result r = run_cli(dir, "gradcheck --json");
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == 1);
  const json report = json::parse(lines[0]);
  CHECK(report.at("failed") == 0);
  CHECK(report.at("passed").get<int64_t>() > 0);
  REQUIRE(report.at("cases").is_array());
  CHECK(report.at("cases").size() == report.at("passed").get<size_t>());
  for (const json& c : report.at("cases")) CHECK(c.at("passed") == true);

  const Result filtered = run_cli(dir, "gradcheck --json --filter softmax");
  REQUIRE(filtered.exit_code == 0);
  const json some = json::parse(filtered.out);
  CHECK(some.at("failed") == 0);
  CHECK(some.at("cases").size() < report.at("cases").size());
}

TEST_CASE("train: cli a model without encoder layers trains and its checkpoint loads") {
  // n_layers = 0 is a valid classifier (embeddings, pooling, head): what train writes, predict must read.
  TempDir dir("tapegrad_test_cli");
  const std::string out = dir / "run";
  const Result trained = run_cli(dir, "train --layers 0 --steps 5 --eval-every 5 --out " + quote(out));
  INFO("train stderr: " << trained.err);
  REQUIRE(trained.exit_code == 0);
  const Result predicted = run_cli(dir, "predict --json --checkpoint " + quote(out) + " --text 't1 t1 t2'");
  INFO("predict stderr: " << predicted.err);
  CHECK(predicted.exit_code == 0);
  CHECK(lines_of(predicted.out).size() == 1);
  const Result resumed = run_cli(dir, "train --resume " + quote(out) + " --steps 10");
  INFO("resume stderr: " << resumed.err);
  CHECK(resumed.exit_code == 0);
}

TEST_CASE("cli: bench --profile books the step to its ops, and their products add up to the step's FLOPs") {
  TempDir dir("tapegrad_test_cli");
  const Result r = run_cli(dir, "bench --config small --d-model 16 --heads 2 --ff 32 --layers 2 --context-length 8 "
                                "--batch-size 4 --warmup 1 --steps 4 --threads 2 --profile --scaling --json");
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(lines_of(r.out).at(0));
  CHECK(!j.at("cpu").get<std::string>().empty());
  CHECK(j.at("thread_scaling").get<double>() > 0);  // 2 threads against 1 (a ratio: no bound on a shared machine)
  CHECK(j.at("threads") == 2);                      // the pool is left at --threads
  CHECK((j.at("vector_bits") == 128 || j.at("vector_bits") == 256 || j.at("vector_bits") == 512));
  const json& profile = j.at("profile");
  CHECK(profile.at("steps") == 4);
  double gflop = 0, ms = 0;
  std::set<std::string> ops;
  for (const json& op : profile.at("ops")) {
    ops.insert(op.at("op").get<std::string>());
    gflop += op.at("gflop_per_step").get<double>();
    ms += op.at("forward_ms_per_step").get<double>() + op.at("backward_ms_per_step").get<double>();
  }
  for (const char* op : {"matmul_bias", "linear_relu", "fused_self_attention", "layer_norm", "cross_entropy",
                         "optimizer step (AdamW)"})
    CHECK(ops.count(op) == 1);
  // every product of the step, forward and backward, and nothing else: the documented formula
  CHECK(gflop == Approx(j.at("gflop_per_step").get<double>()).epsilon(1e-9));
  CHECK(ms > 0);
  CHECK(ms <= profile.at("ms_per_step").get<double>() * 1.001);  // booked time is part of the step's
  // and the table for people
  const Result text = run_cli(dir, "bench --config small --d-model 16 --heads 2 --ff 32 --layers 1 --context-length 8 "
                                   "--batch-size 4 --warmup 1 --steps 2 --threads 1 --profile");
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("CPU: ") && Catch::Contains("-bit vectors") && Catch::Contains("backward ms") &&
                           Catch::Contains("fused_self_attention"));
}

TEST_CASE("cli: bench --json gives one line of sane figures per configuration, and bad flags one error line") {
  TempDir dir("tapegrad_test_cli");
  // train's names for the model flags, then bench's older names (aliases): the same sizes either way
  const Result r = run_cli(dir, "bench --config small,small --d-model 16 --heads 2 --ff 32 --layers 1 --context-length 8 "
                                "--batch-size 4 --warmup 1 --steps 5 --threads 1 --json");
  const Result old = run_cli(dir, "bench --config small --d-model 16 --heads 2 --d-ff 32 --layers 1 --seq 8 "
                                  "--batch 4 --warmup 1 --steps 5 --threads 1 --json");
  INFO("stderr (older names): " << old.err);
  REQUIRE(old.exit_code == 0);
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == 2);  // one a configuration
  REQUIRE(lines_of(old.out).size() == 1);
  lines.push_back(lines_of(old.out).at(0));
  for (const std::string& line : lines) {
    const json j = json::parse(line);
    CHECK(j.at("config") == "small");
    CHECK(j.at("d_model") == 16);
    CHECK(j.at("d_ff") == 32);
    CHECK(j.at("seq") == 8);
    CHECK(j.at("batch") == 4);
    CHECK(j.at("threads") == 1);
    CHECK(j.at("steps_per_second").get<double>() > 0);
    CHECK(j.at("tokens_per_second").get<double>() == Approx(j.at("steps_per_second").get<double>() * 32));
    // FLOPs of the step by the documented formula (train/cli/bench.cpp): N = 32 rows, C 16, F 32, T 8, 8 classes.
    const double layer = 2.0 * 32 * 16 * 48 + 2.0 * 32 * 16 * 16 + 4.0 * 4 * 8 * 8 * 16 + 4.0 * 32 * 16 * 32;
    CHECK(j.at("gflop_per_step").get<double>() == Approx(3 * (layer + 2.0 * 4 * 16 * 8) / 1e9));
    const double mfu = j.at("model_flop_utilisation").get<double>();
    CHECK((mfu > 0 && mfu <= 1));
#if defined(__SANITIZE_ADDRESS__)
    CHECK(j.at("heap_allocations_per_step").is_null());  // ASan owns the allocator: not counted, and said so
#else
    CHECK(j.at("heap_allocations_per_step") == 0);  // counted by the executable: none once warm
#endif
    CHECK(j.at("peak_rss_mib").get<double>() > 0);
    CHECK(!j.at("blas_kernels").get<std::string>().empty());
    CHECK(j.at("profile").is_null());  // only with --profile
    CHECK(j.at("thread_scaling").is_null());  // only with --scaling
  }
  require_one_line_error(run_cli(dir, "bench --config huge"), "unknown configuration 'huge'");
  require_one_line_error(run_cli(dir, "bench --config small --context-length 2"), "--context-length must be in [4, ");
}

TEST_CASE("cli: bench's long configuration is issue 20's model at T = 2048 and --help lists it") {
  const BenchConfig long_config = bench_config("long");
  CHECK(long_config.d_model == 256);
  CHECK(long_config.heads == 4);
  CHECK(long_config.d_ff == 1024);
  CHECK(long_config.layers == 2);
  CHECK(long_config.seq == 2048);
  CHECK(long_config.batch == 2);
  CHECK(long_config.warmup + long_config.steps <= 60);  // a step takes about a second: about a minute in all
  CHECK_NOTHROW(validate(long_config));
  TempDir dir("tapegrad_test_cli");
  const Result help = run_cli(dir, "bench --help");
  REQUIRE(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("long: d_model 256, 4 heads, d_ff 1024, 2 layers, T 2048, batch 2"));
  require_one_line_error(run_cli(dir, "bench --config huge"), "(registered: small, medium, long or lm)");
}

TEST_CASE("cli: bench's lm configuration times the language model: tokens/s, its FLOPs, no allocation once warm") {
  const BenchConfig lm = bench_config("lm");
  CHECK(lm.language_model);
  CHECK(lm.d_model == 128);
  CHECK(lm.heads == 4);
  CHECK(lm.d_ff == 512);
  CHECK(lm.layers == 4);
  CHECK(lm.seq == 128);
  CHECK(lm.batch == 32);
  CHECK(lm.vocab == 96);
  CHECK_NOTHROW(validate(lm));
  TempDir dir("tapegrad_test_cli");
  // 3 warm-up steps: after 1 the storage cache still misses (train/cli/bench.cpp). T = 128, the lm
  // configuration's: below 128 keys attention takes the fused op, whose causal mask is built each forward.
  const Result r = run_cli(dir, "bench --config lm --d-model 16 --heads 2 --ff 32 --layers 1 --batch-size 2 "
                                "--warmup 3 --steps 5 --threads 1 --json");
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(lines_of(r.out).at(0));
  CHECK(j.at("config") == "lm");
  CHECK(j.at("model") == "language_model");
  CHECK(j.at("vocab") == 96);
  CHECK(j.at("seq") == 128);
  // embed 96·16, pos_embed 128·16, one pre-LN layer (4·16² + 4·16 attention, 2·16·32 + 32 + 16 feed-forward,
  // 2 norms), the final norm, head 16·96 without bias
  const int64_t layer = 4 * 16 * 16 + 4 * 16 + 2 * 16 * 32 + 32 + 16 + 2 * 2 * 16;
  CHECK(j.at("parameters") == 96 * 16 + 128 * 16 + layer + 2 * 16 + 16 * 96);
  CHECK(j.at("tokens_per_second").get<double>() == Approx(j.at("steps_per_second").get<double>() * 2 * 128));
  // N = 256 positions, C 16, F 32, T 128; the head at every position: 2·N·C·V
  const double flops = 2.0 * 256 * 16 * 48 + 2.0 * 256 * 16 * 16 + 4.0 * 2 * 128 * 128 * 16 + 4.0 * 256 * 16 * 32;
  CHECK(j.at("gflop_per_step").get<double>() == Approx(3 * (flops + 2.0 * 256 * 16 * 96) / 1e9));
  CHECK(std::isfinite(j.at("final_loss").get<double>()));
#if defined(__SANITIZE_ADDRESS__)
  CHECK(j.at("heap_allocations_per_step").is_null());
#else
  CHECK(j.at("heap_allocations_per_step") == 0);  // each step's windows are written into the same tensors
#endif
}

TEST_CASE("train: cli a non-finite loss or weight stops training, and --detect-anomaly names the op that made it") {
  // SGD at lr 3e38 with an L2 weight decay of 3e38 (the largest float32 is 3.4e38): the first update makes
  // weights infinite or NaN, and the next forward reads them.
  TempDir dir("tapegrad_test_cli");
  const std::string out = dir / "run";
  const std::string args = "train --optimizer sgd --lr 3e38 --weight-decay 3e38 --steps 20 --eval-every 1 --out " + quote(out);
  // Training logs its progress first; the error is the last line.
  const auto last_line = [](const Result& r) { return lines_of(r.err).empty() ? "" : lines_of(r.err).back(); };
  const Result plain = run_cli(dir, args);
  INFO(plain.err);
  CHECK(plain.exit_code == 1);
  CHECK_THAT(last_line(plain), Catch::StartsWith("tapegrad train: training diverged at step 1"));
  CHECK_THAT(last_line(plain), Catch::Contains("--detect-anomaly names the op"));
  fs::remove_all(out);
  const Result detected = run_cli(dir, args + " --detect-anomaly");
  INFO(detected.err);
  CHECK(detected.exit_code == 1);
  CHECK_THAT(last_line(detected), Catch::StartsWith("tapegrad train: anomaly: forward of "));
  CHECK_THAT(last_line(detected), Catch::Contains("produced NaN (element ["));
  CHECK_THAT(last_line(detected), Catch::Contains("already holds"));  // the update made the weights non-finite
  CHECK_THAT(last_line(detected), Catch::Contains("stopped after step 1; no checkpoint was saved yet"));
}
