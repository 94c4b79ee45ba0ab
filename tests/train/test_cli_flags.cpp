// The flags of the tapegrad command line, run as a real process: every subcommand's --help lists exactly its
// flags (train's from its flag table, train/cli/train_flags.h, the one list of them), and every train flag is
// refused in each mode its row says it has no effect in, and honoured or refused on --resume as its row says.
#include <catch2/catch.hpp>
#include <algorithm>

#include "nn/settings.h"
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "support/cli.h"
#include "support/temp_dir.h"
#include "train/cli/train_flags.h"

using namespace tapegrad;
using namespace tapegrad::testing;
namespace fs = std::filesystem;

namespace {

/// The flags a subcommand's --help lists (its first column: "--flag", "-h,--help", "--ff TEXT"), --help aside.
std::set<std::string> flags_in_help(const std::string& help) {
  static const std::regex option(R"(^\s+(?:-\w,)?(--[\w-]+))");
  std::set<std::string> flags;
  for (const std::string& line : lines_of(help))
    if (std::smatch m; std::regex_search(line, m, option) && m[1] != "--help") flags.insert(m[1]);
  return flags;
}

/// Every row of train's flag table (train/cli/train_flags.h), the one list of train's flags.
std::vector<cli::TrainFlag> train_table() {
  static cli::TrainFlags flags;  // the rows are bound to it
  return cli::train_flag_table(flags);
}

}  // namespace

TEST_CASE("train: cli every subcommand has --help listing its flags") {
  TempDir dir("tapegrad_test_cli");
  std::set<std::string> train_flags;
  for (const cli::TrainFlag& row : train_table()) train_flags.insert(row.name);
  // Every flag of each subcommand, exactly: a flag missing from --help, or one --help lists that is not here
  // (for train: not in the table), fails.
  const std::vector<std::pair<std::string, std::set<std::string>>> commands = {
      {"train", train_flags},
      {"eval", {"--checkpoint", "--task", "--data", "--symbols", "--min-len", "--max-len", "--seed", "--valid-size", "--json"}},
      {"predict", {"--checkpoint", "--text", "--attention-svg", "--json"}},
      {"gradcheck", {"--json", "--filter", "--list"}},
      {"bench", {"--config", "--d-model", "--heads", "--ff", "--layers", "--context-length", "--batch-size", "--warmup",
                 "--steps", "--threads", "--activation-checkpointing", "--json", "--profile", "--scaling"}},
  };
  const Result top = run_cli(dir, "--help");
  REQUIRE(top.exit_code == 0);
  for (const auto& [command, flags] : commands) CHECK_THAT(top.out, Catch::Contains(command));
  for (const auto& [command, flags] : commands) {
    for (const char* help : {"--help", "-h"}) {
      const Result r = run_cli(dir, cat(command, " ", help));
      INFO("tapegrad " << command << " " << help << "\nstdout: " << r.out << "\nstderr: " << r.err);
      CHECK(r.exit_code == 0);
      CHECK(r.err.empty());
      CHECK_THAT(r.out, Catch::Contains("Usage:"));
      CHECK(flags_in_help(r.out) == flags);
    }
  }
}

TEST_CASE("train: cli the flag table has one row a flag, each with its help, and the rows another part adds") {
  const std::vector<cli::TrainFlag> table = train_table();
  std::set<std::string> names;
  for (const cli::TrainFlag& row : table) {
    INFO(row.name);
    CHECK(names.insert(row.name).second);  // once
    CHECK(row.name.starts_with("--"));
    CHECK(!row.help.empty());
    CHECK(static_cast<bool>(row.add));
  }
  // Every setting a registered component declares is a row, generated from its declaration.
  for (const nn::DeclaredSetting& d : nn::declared_settings()) {
    INFO(d.spec.flag);
    const auto row = std::find_if(table.begin(), table.end(), [&](const cli::TrainFlag& r) { return r.name == d.spec.flag; });
    REQUIRE(row != table.end());
    CHECK(row->kind == d.kind);
    CHECK(row->variants == d.variants);
    CHECK(row->is(cli::kModelShape) == d.spec.changes_model);
  }
  // A source of rows from elsewhere is appended after the table's own rows. This one gives its row only to the
  // flags of this test, so that the other tests of this process see the table the command line has.
  static const bool added = cli::add_train_flag_rows([](cli::TrainFlags& f) {
    if (f.task != "rows-test") return std::vector<cli::TrainFlag>{};
    return std::vector<cli::TrainFlag>{{"--extra-test-flag", "a row from elsewhere", cli::kResumable, "", nullptr}};
  });
  CHECK(added);
  cli::TrainFlags flags;
  flags.task = "rows-test";
  const std::vector<cli::TrainFlag> grown = cli::train_flag_table(flags);
  REQUIRE(grown.size() == table.size() + 1);
  CHECK(grown.back().name == "--extra-test-flag");
  CHECK(train_table().size() == table.size());
}

TEST_CASE("train: cli every train flag is refused in each mode its row says it has no effect in") {
  TempDir dir("tapegrad_test_cli");
  const std::string out = " --out " + quote(dir / "run");
  const auto refused = [&](const std::string& args, const std::string& mentions) {
    INFO("tapegrad " << args);
    require_one_line_error(run_cli(dir, args + out), mentions);
  };
  size_t checked = 0;
  for (const cli::TrainFlag& row : train_table()) {
    const std::string flag = row.example.empty() ? row.name : cat(row.name, " ", quote(row.example));
    if (row.is(cli::kRanksOnly)) {  // one process here: refused whatever else is given
      refused("train " + flag, row.name + " applies to data-parallel training only");
      ++checked;
      continue;
    }
    if (row.name == "--resume") continue;
    // On --resume: honoured (the run is then looked for, and is missing) or refused by name.
    const Result resumed = run_cli(dir, "train --resume " + quote(dir / "no_such_run") + " " + flag);
    INFO("tapegrad train --resume no_such_run " << flag << "\nstderr: " << resumed.err);
    CHECK(resumed.exit_code != 0);
    if (row.is(cli::kResumable)) CHECK_THAT(resumed.err, Catch::Contains("no_such_run") && !Catch::Contains("cannot change"));
    else CHECK_THAT(resumed.err, Catch::Contains(row.name + " cannot change when resuming"));
    // A language model's flag is judged in a language model's run, where it has its effect.
    const std::string mode = row.is(cli::kLanguageModelOnly) ? "train --task lm --data x.txt " : "train ";
    if (row.is(cli::kTaskOnly)) refused("train --data x.tsv " + flag, row.name + " configures a built-in task");
    if (row.is(cli::kDataOnly)) refused("train " + flag, row.name + " needs --data");
    if (row.is(cli::kModelShape)) refused(mode + "--init ckpt " + flag, row.name + " cannot change with --init");
    if (row.is(cli::kLayerSetting)) refused(mode + "--layers 0 " + flag, row.name + " configures the encoder layers");
    if (row.is(cli::kFixedSet)) refused("train " + flag, row.name + " needs a fixed training set");
    if (row.is(cli::kLanguageModelOnly)) refused("train " + flag, row.name + " applies to --task lm only");
    if (row.is(cli::kBpeOnly))
      refused("train --task lm --data x.txt " + flag, row.name + " applies to --tokenizer bpe only, not characters");
    if (row.is(cli::kClassifierOnly))
      refused("train --task lm --data x.txt " + flag, row.name + " does not apply to --task lm");
    // A component's setting with the default variant not declaring it: "--top-k applies to --ffn moe only".
    const std::vector<std::string>& variants = row.variants;
    if (!row.kind.empty() &&
        std::find(variants.begin(), variants.end(), nn::chosen_variant(nn::ClassifierOptions{}, row.kind)) == variants.end())
      refused("train " + flag, cat(row.name, " applies to --", row.kind, " ", choices_text(variants), " only"));
    if (row.is(cli::kMomentum)) refused("train --optimizer adam " + flag, row.name + " applies to --optimizer sgd only, not adam");
    ++checked;
  }
  CHECK(checked + 1 == train_table().size());  // all but --resume itself
  CHECK(!fs::exists(dir / "run"));
}


TEST_CASE("train: cli every flag of every other subcommand is refused where it would have no effect") {
  // train's flags are its table's (the test above). Here each flag of the other subcommands, exactly those
  // --help lists, either has its effect in every use (the reason said) or names the uses where it has none,
  // each of which must be refused by name; a new flag fails this test until it is placed.
  TempDir dir("tapegrad_test_cli");
  const std::string classifier = quote(train_keyword_model(dir));
  const std::string text = quote(dir.file("text.txt", std::string(40, 'a') + " the cat sat on the mat\n"));
  const std::string lm = quote(dir / "lm"), linear = quote(dir / "linear");
  for (const auto& [out, attention] : {std::pair{lm, "softmax"}, {linear, "linear"}})
    REQUIRE(run_cli(dir, cat("train --task lm --data ", text, " --attention ", attention,
                             " --d-model 8 --heads 2 --ff 8 --layers 1 --context-length 8 --steps 1 --out ", out))
                .exit_code == 0);
  struct Use {
    std::string args, refusal;  // a use where the flag has no effect, and what its refusal says
  };
  struct Flag {
    std::string name, always;  // always: why the flag has its effect in every use ("" when uses list where not)
    std::vector<Use> no_effect = {};
  };
  const std::string eval_lm = "eval --checkpoint " + lm + " --data " + text;
  const std::string eval_tsv = "eval --checkpoint " + classifier + " --data " + quote(dir / "train.tsv");
  const auto task_flag = [&](const std::string& flag, const std::string& value) {
    return Flag{flag, "", {{cat(eval_tsv, " ", flag, " ", value), flag + " configures a built-in task, which --data replaces"},
                           {cat(eval_lm, " ", flag, " ", value), flag + " configures a built-in task, not a language model's text"}}};
  };
  const std::string generate = "generate --checkpoint " + lm + " --prompt the ";
  // Sampling flags have no effect where one token is always taken: greedy, and --top-k 1 (but for itself).
  const auto greedy = [&](const std::string& flag, const std::string& value) {
    std::vector<Use> uses = {{cat(generate, "--top-k 1 ", flag, " ", value), flag + " has no effect with --top-k 1"}};
    if (flag != "--temperature")
      uses.push_back({cat(generate, "--temperature 0 ", flag, " ", value), flag + " has no effect with --temperature 0"});
    return Flag{flag, "", uses};
  };
  Flag top_k = greedy("--top-k", "3");
  top_k.no_effect = {top_k.no_effect.back(),  // and a k of the whole vocabulary
                     {generate + "--top-k 1000", "--top-k 1000 has no effect: " + lm.substr(1, lm.size() - 2)}};
  const std::vector<std::pair<std::string, std::vector<Flag>>> commands = {
      {"eval",
       {{"--checkpoint", "the model scored"}, {"--task", "the examples scored"}, {"--data", "the examples scored"},
        task_flag("--symbols", "5"), task_flag("--min-len", "2"), task_flag("--max-len", "6"),
        task_flag("--seed", "1"), task_flag("--valid-size", "10"), {"--json", "the form of the output"}}},
      {"predict",
       {{"--checkpoint", "the model"}, {"--text", "the texts (instead of stdin)"},
        {"--attention-svg", "writes the file (refused for a model with no attention weights)"},
        {"--json", "the form of the output"}}},
      {"generate",
       {{"--checkpoint", "the model"}, {"--prompt", "the text continued"}, {"--max-new-tokens", "the text's length"},
        greedy("--temperature", "2"), top_k, greedy("--top-p", "0.5"), greedy("--seed", "2"),
        {"--no-cache", "", {{"generate --checkpoint " + linear + " --prompt the --no-cache", "--no-cache has no effect"}}},
        {"--json", "the form of the output"}}},
      {"gradcheck", {{"--json", "the form of the output"}, {"--filter", "the cases run"}, {"--list", "lists instead of running"}}},
      {"bench",
       {{"--config", "the models timed"}, {"--d-model", "the model timed"}, {"--heads", "the model timed"},
        {"--ff", "the model timed"}, {"--layers", "the model timed"}, {"--context-length", "the model timed"},
        {"--batch-size", "the step timed"}, {"--warmup", "the untimed steps"}, {"--steps", "the timed steps"},
        {"--threads", "the threads timed"}, {"--activation-checkpointing", "the step timed"},
        {"--json", "the form of the output"}, {"--profile", "adds the per-op table"}, {"--scaling", "adds the speed-up"}}},
  };
  for (const auto& [command, flags] : commands) {
    std::set<std::string> placed;
    for (const Flag& flag : flags) {
      placed.insert(flag.name);
      CHECK((flag.always.empty() != flag.no_effect.empty()));  // a reason, or the uses without effect
      for (const Use& use : flag.no_effect) {
        INFO("tapegrad " << use.args);
        require_one_line_error(run_cli(dir, use.args), use.refusal);
      }
    }
    const Result help = run_cli(dir, command + " --help");
    INFO("tapegrad " << command << " --help");
    CHECK(flags_in_help(help.out) == placed);
  }
}
