#pragma once
// The flags of `tapegrad train`, listed once. Each row is a flag: its name, help, what it sets (bound when
// the command line is built) and what it is: the properties from which the checks of the modes it makes
// sense in are derived (refuse_flags_without_effect in train_command.cpp), and which the tests iterate
// (tests/train/test_cli_flags.cpp: every row is in --help and refused in every mode its properties say, and
// every flag of --help is a row).
//   add_train defines the flags from train_flag_table(); nothing else lists them.
// The components' settings are rows generated from their declarations in nn/ (nn::declared_settings), after
// the table's own rows; more can come from elsewhere: add_train_flag_rows appends a source of rows.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "train/parallel/communicator.h"
#include "train/parallel/data_parallel.h"
#include "train/parallel/mpi/launch.h"
#include "train/train_options.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace tapegrad::cli {

/// What `tapegrad train` was given (the table's rows are bound to its fields); the data-parallel part is
/// filled in as the ranks connect.
struct TrainFlags {
  TrainOptions options;
  std::string task = "majority", resume;
  bool no_shuffle = false, json = false;
  // Data parallelism: how mpirun started this process, the ranks once connected, and their settings.
  Launch launch = launch_from_environment();
  std::unique_ptr<Communicator> ranks;
  DataParallelOptions data_parallel;
  bool no_overlap = false;
  double comm_timeout = 60;
};

/// What a flag is. A row's properties are a bitwise or of these.
enum FlagProperty : unsigned {
  kModelShape = 1u << 0,     // the model's shape or what it computes: refused with --init (the checkpoint's)
  kLayerSetting = 1u << 1,   // configures the encoder layers: refused with --layers 0
  kTaskOnly = 1u << 2,       // configures a built-in task: refused with --data
  kDataOnly = 1u << 3,       // configures --data's validation split: refused without --data
  kResumable = 1u << 4,      // honoured on --resume (every other flag is refused there)
  kRanksOnly = 1u << 5,      // data-parallel training only: refused unless mpirun started N > 1 ranks
  kFixedSet = 1u << 6,       // needs a fixed training set (--data or --train-size)
  kMomentum = 1u << 7,       // the momentum: refused with an optimizer whose registration does not read it
  kLanguageModelOnly = 1u << 8,  // configures a language model (--task lm): refused otherwise
  kClassifierOnly = 1u << 9,     // configures a classifier or its data: refused with --task lm
  kBpeOnly = 1u << 10,           // configures a learnt or given SentencePiece model: refused without --tokenizer bpe
};

struct TrainFlag {
  std::string name;    // "--lr"
  std::string help;    // as --help shows it
  unsigned properties = 0;
  std::string example; // a value the flag accepts on its own ("" for a switch): what the tests give it
  /// Defines the option on the train subcommand, bound to its field of the TrainFlags the table was made for.
  std::function<CLI::Option*(CLI::App* cmd)> add;
  /// The TrainOptions field it sets, as validate() names it ("model.n_heads"), where the flag's name does not
  /// say it: flag_for reads a field's flag from here, and otherwise from the name ("model.d_model": --d-model).
  std::string field = {};
  /// A component's setting (generated from its declaration, nn::declared_settings): its kind ("ffn") and the
  /// variants that declare it ({"moe"}); with another variant chosen it is refused by name. Empty otherwise.
  std::string kind = {};
  std::vector<std::string> variants = {};

  bool is(unsigned property) const { return (properties & property) != 0; }
};

/// Every flag of `tapegrad train`, bound to f (which must outlive the command line): the table's own rows, one
/// for each setting the registered components declare, then those of each source added by add_train_flag_rows,
/// in the order they were added.
std::vector<TrainFlag> train_flag_table(TrainFlags& f);

/// Appends a source of rows to the table (for example a model variant's settings, from its declaration);
/// call it before the command line is built. Returns true, so that a file adds its rows at load time.
bool add_train_flag_rows(std::function<std::vector<TrainFlag>(TrainFlags&)> rows);

/// The flag that sets a TrainOptions field ("model.d_ff" -> "--ff"): validate()'s names on the command line.
/// A row's field when one names it, otherwise the field's last part in flag form ("task.max_len" -> "--max-len").
std::string flag_for(std::string_view field);

/// The names of the rows having property, in table order.
std::vector<std::string> flags_with(const std::vector<TrainFlag>& table, unsigned property);

}  // namespace tapegrad::cli
