#include "train/run_on_ranks.h"

#include <filesystem>
#include <set>

#include "autograd/autograd.h"
#include "train/publish_run.h"

namespace tapegrad {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// What every rank of a run must agree on (agree_on_setup): the options (but for the data
/// files' paths, which may differ between hosts), the fingerprints of the examples read, the vocabulary and
/// labels (or a language model's tokenizer), how gradients are averaged, and the step a resumed run continues from.
std::string settings_to_agree_on(const Run& run, const DataParallelOptions& parallel) {
  json options = to_json(run.options);
  for (const char* path : {"data", "valid", "init"}) options.erase(path);
  return json{
      {"options", options},
      {"data", run.data.sources},
      {"vocab_size", run.data.vocab.size()},
      {"labels", run.data.labels},
      {"tokenizer", run.data.tokenizer ? run.data.tokenizer->to_json() : json()},
      {"averaging", {{"overlap", parallel.overlap}, {"exact", parallel.exact}, {"bucket_mb", parallel.bucket_mb}}},
      {"step", run.progress.step}}
      .dump();
}

/// FNV-1a over the bytes of every parameter: ranks that applied the same updates have the same.
std::string weights_fingerprint(const nn::Module& model) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const auto& [name, p] : model.named_parameters()) {
    const Tensor values = p.contiguous();  // float32: the averager trains nothing else
    const auto* bytes = reinterpret_cast<const unsigned char*>(values.data<float>());
    for (size_t i = 0; i < static_cast<size_t>(values.numel()) * sizeof(float); ++i)
      hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  }
  return std::to_string(hash);
}

}  // namespace

void join_ranks(Run& run, const std::string& error, const DataParallelOptions& parallel) {
  RunRanks& ranks = run.ranks;
  Communicator& comm = *ranks.comm;
  agree_on_setup(comm, error, error.empty() ? settings_to_agree_on(run, parallel) : "{}");
  if (comm.rank() == 0) fs::create_directories(run.options.out);
  check_shared_directory(comm, run.options.out);
  const std::vector<std::string> hosts = comm.allgather(comm.host());
  ranks.hosts = static_cast<int>(std::set<std::string>(hosts.begin(), hosts.end()).size());
  std::vector<Tensor> state;
  for (const auto& [name, p] : run.model->module().named_parameters()) state.push_back(p);
  const nn::NamedTensors optimizer_state = run.optimizer->state();
  for (const auto& [name, t] : optimizer_state) state.push_back(t);
  broadcast_tensors(comm, state);
  run.optimizer->load_state(optimizer_state);
  ranks.averager = std::make_unique<GradientAverager>(comm, run.model->module().named_parameters(), parallel);
}

Generator rank_dropout_stream(uint64_t rank0_seed, int rank, int64_t step) {
  return Generator(rank0_seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(rank)) ^ static_cast<uint64_t>(step));
}

void gather_rank_state(Run& run) {
  const std::vector<std::string> states = run.ranks.comm->allgather(
      json{{"dropout", to_json(run.dropout_rng->state())}, {"weights", weights_fingerprint(run.model->module())}}.dump());
  run.ranks.rank_dropout.clear();
  const json first = json::parse(states[0]);
  for (size_t r = 1; r < states.size(); ++r) {
    const json rank = json::parse(states[r]);
    if (rank.at("weights") != first.at("weights"))
      throw AgreedError(cat("rank ", r, "'s weights differ from rank 0's at step ", run.progress.step,
                            ": the ranks must run the same tapegrad on the same data; ", kept_checkpoint(run)));
    run.ranks.rank_dropout.push_back(rank.at("dropout"));
  }
}

}  // namespace tapegrad
