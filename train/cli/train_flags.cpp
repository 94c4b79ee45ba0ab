#include "train/cli/train_flags.h"

#include "nn/settings.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <utility>

#include "autograd/error.h"
#include "nn/components.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/cli/number_flags.h"
#include "train/cli/train_command.h"

namespace tapegrad::cli {

namespace {

using Rows = std::function<std::vector<TrainFlag>(TrainFlags&)>;

/// The sources add_train_flag_rows appended, created on first use (they are added while the program loads).
std::vector<Rows>& extra_rows() {
  static std::vector<Rows> all;
  return all;
}

// ---- one helper per kind of flag: the row, and how its option is defined ----

template <class T>
TrainFlag integer(std::string name, T& field, std::string help, unsigned properties, std::string example,
                  bool show_default = true) {
  return {name, help, properties, std::move(example), [&field, name, help, show_default](CLI::App* cmd) {
            CLI::Option* option = add_integer_option(cmd, name, field, help);
            return show_default ? option->capture_default_str() : option;
          }};
}

TrainFlag real(std::string name, double& field, std::string help, unsigned properties, std::string example) {
  return {name, help, properties, std::move(example),
          [&field, name, help](CLI::App* cmd) { return add_real_option(cmd, name, field, help)->capture_default_str(); }};
}

TrainFlag path(std::string name, std::string& field, std::string help, unsigned properties, std::string example,
               bool show_default = false) {
  return {name, help, properties, std::move(example), [&field, name, help, show_default](CLI::App* cmd) {
            CLI::Option* option = add_path_option(cmd, name, field, help);
            return show_default ? option->capture_default_str() : option;
          }};
}

TrainFlag on_off(std::string name, bool& field, std::string help, unsigned properties) {
  return {name, help, properties, "", [&field, name, help](CLI::App* cmd) { return cmd->add_flag(name, field, help); }};
}

/// A choice among a registry's names: the help lists each with what it is (a user's registered ones too).
/// Membership is checked by validate(), from the same registry, naming the flag.
template <class Entry>
TrainFlag choice(std::string name, std::string& field, const std::string& what, const NamedRegistry<Entry>& registry,
                 unsigned properties, std::string example) {
  std::string help = what + ":";
  for (const Entry& e : registry.entries()) help += cat("\n  ", e.name, ": ", e.help);
  return {name, help, properties, std::move(example),
          [&field, name, help](CLI::App* cmd) { return cmd->add_option(name, field, help)->capture_default_str(); }};
}

/// --task: a registered task, or lm (a language model of --data's text); validate() checks the name.
TrainFlag task_choice(std::string& field) {
  std::string help = "Task generated on the fly, or lm:";
  for (const TaskEntry& e : task_registry().entries()) help += cat("\n  ", e.name, ": ", e.help);
  help += cat("\n  ", kLanguageModelTask, ": a causal language model of --data's text (next-token prediction)");
  return {"--task", help, kTaskOnly, "order",
          [&field, help](CLI::App* cmd) { return cmd->add_option("--task", field, help)->capture_default_str(); }};
}

/// One of a fixed list of words.
TrainFlag one_of(std::string name, std::string& field, std::string help, std::vector<std::string> words,
                 unsigned properties, std::string example) {
  return {name, help, properties, std::move(example), [&field, name, help, words](CLI::App* cmd) {
            return cmd->add_option(name, field, help)->check(CLI::IsMember(words))->capture_default_str();
          }};
}

/// A registered component of Kind, by name; the help lists every variant this program has registered.
template <class Kind>
TrainFlag component(std::string name, std::string& field, const std::string& what, unsigned properties,
                    std::string example) {
  std::string help = what + ":";
  for (const std::string& variant : nn::component_names<Kind>())
    help += cat("\n  ", variant, ": ", nn::component<Kind>(variant).help);
  return {name, help, properties, std::move(example), [&field, name, help](CLI::App* cmd) {
            return cmd->add_option(name, field, help)->check(CLI::IsMember(nn::component_names<Kind>()))->capture_default_str();
          }};
}

/// row, naming the TrainOptions field it sets (where its name does not say it).
TrainFlag setting(std::string field, TrainFlag row) {
  row.field = std::move(field);
  return row;
}

/// The row of a component's setting, from its declaration: its help names the variants that declare it, its
/// default and range ("--ffn moe: experts per layer, in [1, 1024]"). Given, it sets the value in `settings`; not
/// given, the variant's default stays. It configures the encoder layers unless it is the norm's (the final norm
/// has one too), and it changes the model unless declared training-only.
TrainFlag setting_row(const nn::DeclaredSetting& d, nn::ComponentSettings& settings) {
  const std::string range = nn::range_text(d.spec);
  const std::string help =
      cat("--", d.kind, " ", choices_text(d.variants), ": ", d.spec.help, range.empty() ? "" : cat(", in ", range));
  unsigned properties = d.spec.changes_model ? unsigned{kModelShape} : 0u;
  if (d.kind != "norm" && d.kind != "positional" && d.kind != "pool") properties |= kLayerSetting;
  const std::string kind = d.kind, name = d.spec.name, flag = d.spec.flag;
  const nn::SettingType type = d.spec.type;
  const std::string example = type == nn::SettingType::flag ? "" : nn::format_setting(d.spec.default_value);
  auto add = [&settings, kind, name, flag, type, help, example](CLI::App* cmd) -> CLI::Option* {
    switch (type) {
      case nn::SettingType::flag:
        return cmd->add_flag_function(flag, [&settings, kind, name](int64_t) { settings.set(kind, name, true); }, help);
      case nn::SettingType::integer:
        return cmd
            ->add_option_function<std::string>(
                flag, [&settings, kind, name, flag](const std::string& text) {
                  settings.set(kind, name, parse_signed(flag, text, INT64_MIN, INT64_MAX));
                }, help)
            ->type_name("INT")
            ->default_str(example);
      case nn::SettingType::real:
        break;
    }
    return cmd
        ->add_option_function<std::string>(
            flag, [&settings, kind, name, flag](const std::string& text) { settings.set(kind, name, parse_real(flag, text)); },
            help)
        ->type_name("FLOAT")
        ->default_str(example);
  };
  return {flag, help, properties, example, add, cat("model.", kind, ".", name), kind, d.variants};
}

constexpr unsigned kShape = kModelShape, kLayer = kModelShape | kLayerSetting;
constexpr unsigned kMpi = kRanksOnly | kResumable;

// clang-format off
std::vector<TrainFlag> own_rows(TrainFlags& f) {
  TrainOptions& o = f.options;
  nn::ClassifierOptions& m = o.model;
  return {
      setting("task.name", task_choice(f.task)),
      path("--data", o.data, "Training data: a TSV file of label<TAB>text lines (--task lm: a text file)", kResumable, "train.tsv"),
      path("--valid", o.valid, "Validation TSV or (--task lm) text (default: a seeded split of --data; --task lm: its last --valid-fraction)", kResumable | kDataOnly, "valid.tsv"),
      real("--valid-fraction", o.valid_fraction, "Share of --data held out when --valid is not given", kDataOnly, "0.2"),
      one_of("--tokenizer", o.tokenizer, "--task lm: how the text becomes tokens: characters (every UTF-8 code point), words (runs of non-whitespace), bpe (SentencePiece subwords learnt from the training text)", {"characters", "words", "bpe"}, kShape | kLanguageModelOnly, "words"),
      integer("--vocab-size", o.vocab_size, "--tokenizer bpe: the subwords SentencePiece learns from the training text", kShape | kLanguageModelOnly | kBpeOnly, "300"),
      path("--tokenizer-model", o.tokenizer_model, "--tokenizer bpe: an existing SentencePiece model, instead of learning one", kShape | kLanguageModelOnly | kBpeOnly, "m.model"),
      on_off("--tie-embeddings", o.tie_embeddings, "--task lm: the output head's weight is the token embedding's (GPT-2's weight tying)", kShape | kLanguageModelOnly),
      integer("--train-size", o.train_size, "Task only: a fixed training set of this many examples (0: fresh ones every batch)", kTaskOnly, "100"),
      integer("--valid-size", o.valid_size, "Task only: examples in the validation set (fewer for long sequences)", kTaskOnly, "100"),
      integer("--symbols", o.task.symbols, "Task vocabulary size V (words t0..t{V-1})", kTaskOnly, "6"),
      integer("--min-len", o.task.min_len, "Shortest generated sequence", kTaskOnly, "4"),
      integer("--max-len", o.task.max_len, "Longest generated sequence", kTaskOnly, "12"),
      integer("--d-model", m.d_model, "Model width", kShape, "16"),
      setting("model.n_heads", integer("--heads", m.n_heads, "Attention heads", kLayer, "4")),
      setting("model.d_ff", integer("--ff", m.d_ff, "Feed-forward width", kLayer, "32")),
      setting("model.n_layers", integer("--layers", m.n_layers, "Encoder layers", kShape, "1")),
      integer("--context-length", o.context_length, "Longest sequence the model accepts (0: the longest the data can produce)", kShape, "40"),
      component<nn::PositionalKind>("--positional", m.positional, "Position information", kShape, "sinusoidal"),
      component<nn::AttentionKind>("--attention", m.attention, "Self-attention of each layer", kLayer, "linear"),
      component<nn::NormKind>("--norm", m.norm, "Normalisation of each layer (and the final one)", kShape, "layernorm"),
      component<nn::FeedForwardKind>("--ffn", m.ffn, "Position-wise block of each layer", kLayer, "moe"),
      component<nn::ActivationKind>("--activation", m.activation, "Activation of the feed-forward block", kLayer, "gelu"),
      component<nn::PoolKind>("--pool", m.pool, "How a sequence becomes one vector", kShape | kClassifierOnly, "cls"),
      on_off("--norm-first", m.norm_first, "Pre-LN layers (the norm before attention and feed-forward)", kLayer),
      on_off("--final-norm", m.final_norm, "A norm after the last encoder layer (a language model always has one)", kShape | kClassifierOnly),
      real("--dropout", m.dropout, "Dropout probability", 0, "0.1"),
      choice("--optimizer", o.optimizer, "Optimizer", optim::optimizers(), 0, "sgd"),
      real("--lr", o.lr, "Learning rate", 0, "0.01"),
      real("--weight-decay", o.weight_decay, "Weight decay (decoupled for adamw, L2 otherwise)", 0, "0"),
      real("--momentum", o.momentum, "SGD momentum", kMomentum, "0.5"),
      integer("--warmup", o.warmup, "Linear warm-up steps", 0, "2"),
      choice("--schedule", o.schedule, "Learning rate after warm-up", optim::schedules(), 0, "cosine"),
      real("--clip-grad", o.clip_grad, "Clip the global gradient norm to this (0: off)", 0, "1"),
      integer("--batch-size", o.batch_size, "Examples per step", 0, "8"),
      integer("--steps", o.steps, "Total optimizer steps (default 2000, or from --epochs)", kResumable, "5", false),
      integer("--epochs", o.epochs, "Passes over a fixed training set (--data or --train-size)", kFixedSet | kClassifierOnly, "1", false),
      integer("--seed", o.seed, "Seed of every random stream", 0, "3"),
      integer("--threads", o.threads, "Threads for everything, BLAS included (0: every core)", kResumable, "1"),
      integer("--eval-every", o.eval_every, "Validate (and checkpoint) every this many steps", 0, "5"),
      integer("--log-every", o.log_every, "Add the mean training loss of the last this many steps to metrics.csv and curves.svg", 0, "5"),
      real("--target-acc", o.target_acc, "Stop once validation accuracy reaches this fraction (0: never)", 0, "0.5"),
      path("--out", o.out, "Run directory: checkpoint, best/, metrics.csv, curves.svg", 0, "elsewhere", true),
      path("--init", o.init, "Start from this checkpoint's weights and vocabulary, with a fresh optimizer", 0, "checkpoint"),
      path("--resume", f.resume, "Continue this run directory exactly where it stopped (--steps sets a new total)", kResumable, "run"),
      on_off("--no-shuffle", f.no_shuffle, "Visit a fixed training set in file order", kFixedSet | kClassifierOnly),
      on_off("--overwrite", o.overwrite, "Replace a training run already in --out (refused otherwise)", 0),
      on_off("--json", f.json, "Print one JSON line with the results on stdout at the end", kResumable),
      on_off("--verbose", o.verbose, "Also print the threads and the BLAS kernels in use", kResumable),
      one_of("--activation-checkpointing", o.activation_checkpointing,
             cat("Recompute the encoder layers' activations in backward instead of keeping them (every layer but the last): less memory, one more forward of those layers. auto: from ", kCheckpointFromPositions, " positions on"),
             {"auto", "on", "off"}, kResumable, "on"),
      on_off("--detect-anomaly", o.detect_anomaly, "Check every op for NaN and Inf and name the first that makes one, with its shapes and place in the model (slower)", kResumable),
      // Data parallelism: `mpirun -np N tapegrad train ...` (docs/distributed.md).
      on_off("--exact-reduction", f.data_parallel.exact, "mpirun: add the ranks' gradients in rank order in double, the same bits in every run (slower)", kMpi),
      on_off("--no-overlap", f.no_overlap, "mpirun: sum the gradients after backward, not bucket by bucket during it", kMpi),
      real("--bucket-mb", f.data_parallel.bucket_mb, "mpirun: gradient megabytes per bucket summed during backward", kMpi, "8"),
      real("--comm-timeout", f.comm_timeout, "mpirun: seconds to wait for the other ranks before stopping", kMpi, "30"),
  };
}
// clang-format on

}  // namespace

std::vector<TrainFlag> train_flag_table(TrainFlags& f) {
  std::vector<TrainFlag> table = own_rows(f);
  for (const nn::DeclaredSetting& d : nn::declared_settings()) table.push_back(setting_row(d, f.options.model.settings));
  for (const Rows& rows : extra_rows())
    for (TrainFlag& row : rows(f)) table.push_back(std::move(row));
  return table;
}

bool add_train_flag_rows(std::function<std::vector<TrainFlag>(TrainFlags&)> rows) {
  if (!rows) throw ValueError("add_train_flag_rows: no rows given");
  extra_rows().push_back(std::move(rows));
  return true;
}

std::string flag_for(std::string_view field) {
  static TrainFlags unbound;  // the rows' fields are read, never set
  static const std::vector<TrainFlag> table = train_flag_table(unbound);
  for (const TrainFlag& row : table)
    if (row.field == field) return row.name;
  for (std::string_view group : {"model.", "task."})  // model.d_model -> --d-model, task.max_len -> --max-len
    if (field.starts_with(group)) field.remove_prefix(group.size());
  std::string flag = cat("--", field);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::vector<std::string> flags_with(const std::vector<TrainFlag>& table, unsigned property) {
  std::vector<std::string> names;
  for (const TrainFlag& row : table)
    if (row.is(property)) names.push_back(row.name);
  return names;
}

}  // namespace tapegrad::cli
