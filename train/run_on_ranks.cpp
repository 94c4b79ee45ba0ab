#include "train/run_on_ranks.h"

#include <array>
#include <csignal>
#include <filesystem>
#include <set>

#include "autograd/autograd.h"
#include "train/data/batching.h"
#include "train/publish_run.h"

namespace tapegrad {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// What every rank of a run must agree on (agree_on_setup): the options (but for the data
/// files' paths, which may differ between hosts), the fingerprints of the examples read, the vocabulary and
/// labels, how gradients are averaged, and the step a resumed run continues from.
std::string settings_to_agree_on(const Run& run, const DataParallelOptions& parallel) {
  json options = to_json(run.options);
  for (const char* path : {"data", "valid", "init"}) options.erase(path);
  return json{
      {"options", options},
      {"data", run.data.sources},
      {"vocab_size", run.data.vocab.size()},
      {"labels", run.data.labels},
      {"averaging", {{"overlap", parallel.overlap}, {"exact", parallel.exact}, {"bucket_mb", parallel.bucket_mb}}},
      {"step", run.step}}
      .dump();
}

/// FNV-1a over the bytes of every parameter: ranks that applied the same updates have the same.
std::string weights_fingerprint(const nn::SequenceClassifier& model) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const auto& [name, p] : model.named_parameters()) {
    const Tensor values = p.contiguous();
    const auto* bytes =
        static_cast<const unsigned char*>(values.storage()->data) + values.offset() * itemsize(values.dtype());
    for (size_t i = 0; i < static_cast<size_t>(values.numel()) * itemsize(values.dtype()); ++i)
      hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  }
  return std::to_string(hash);
}

/// Rank r's consecutive share of the examples (share_of).
std::vector<Example> share(const std::vector<Example>& examples, const Communicator& comm) {
  const auto [begin, end] = share_of(static_cast<int64_t>(examples.size()), comm.rank(), comm.size());
  return {examples.begin() + begin, examples.begin() + end};
}

}  // namespace

void join_ranks(Run& run, const std::string& error, const DataParallelOptions& parallel) {
  Communicator& comm = *run.comm;
  agree_on_setup(comm, error, error.empty() ? settings_to_agree_on(run, parallel) : "{}");
  if (comm.rank() == 0) fs::create_directories(run.options.out);
  check_shared_directory(comm, run.options.out);
  const std::vector<std::string> hosts = comm.allgather(comm.host());
  run.hosts = static_cast<int>(std::set<std::string>(hosts.begin(), hosts.end()).size());
  std::vector<Tensor> state;
  for (const auto& [name, p] : run.model->named_parameters()) state.push_back(p);
  const nn::NamedTensors optimizer_state = run.optimizer->state();
  for (const auto& [name, t] : optimizer_state) state.push_back(t);
  broadcast_tensors(comm, state);
  run.optimizer->load_state(optimizer_state);
  run.averager = std::make_unique<GradientAverager>(comm, run.model->named_parameters(), parallel);
}

Generator rank_dropout_stream(uint64_t rank0_seed, int rank, int64_t step) {
  return Generator(rank0_seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(rank)) ^ static_cast<uint64_t>(step));
}

std::pair<double, double> data_parallel_step(Run& run, int signal) {
  const TrainOptions& o = run.options;
  Communicator& comm = *run.comm;
  const std::vector<Example> batch = run.data.stream->next_batch(o.batch_size * comm.size());
  const int64_t m = static_cast<int64_t>(batch.size());
  const auto [begin, end] = share_of(m, comm.rank(), comm.size());
  // task loss x n, auxiliary loss x n, sequences cut to the context, SIGINTs, other stops
  std::array<double, 5> sums = {0, 0, 0, signal == SIGINT ? 1.0 : 0.0, signal != 0 && signal != SIGINT ? 1.0 : 0.0};
  run.optimizer->zero_grad();
  if (end > begin) {
    const int64_t n = end - begin;
    const std::vector<Example> mine_examples(batch.begin() + begin, batch.begin() + end);
    const Batch mine =
        make_batch(mine_examples, run.data.vocab, run.data.labels, o.context_length, nn::prepends_cls(o.model));
    const Tensor logits = run.model->forward(mine.ids, mine.key_padding_mask);
    const Tensor task_loss = cross_entropy(logits, mine.targets);
    const Tensor auxiliary = run.model->auxiliary_loss();
    run.averager->backward(auxiliary.defined() ? task_loss + auxiliary : task_loss, n, m);
    sums[0] = task_loss.item() * static_cast<double>(n);
    if (auxiliary.defined()) sums[1] = auxiliary.item() * static_cast<double>(n);
    sums[2] = static_cast<double>(mine.truncated);
  }
  run.averager->finish(sums);
  run.truncated += static_cast<int64_t>(sums[2]);
  if (sums[3] > 0)
    run.agreed_stop = SIGINT;
  else if (sums[4] > 0)
    run.agreed_stop = SIGTERM;
  return {sums[0] / static_cast<double>(m), sums[1] / static_cast<double>(m)};
}

Evaluation validate_on_ranks(Run& run, int64_t max_tokens) {
  Evaluation eval = evaluate(*run.model, share(run.data.valid, *run.comm), run.data.vocab, run.data.labels, max_tokens);
  std::array<double, 3> sums = {eval.loss * static_cast<double>(eval.count),
                                std::round(eval.accuracy * static_cast<double>(eval.count)),
                                static_cast<double>(eval.count)};
  run.comm->sum(sums);
  eval.loss = sums[0] / sums[2];
  eval.accuracy = sums[1] / sums[2];
  eval.count = static_cast<int64_t>(sums[2]);
  return eval;
}

void gather_rank_state(Run& run) {
  const std::vector<std::string> states = run.comm->allgather(
      json{{"dropout", to_json(run.dropout_rng->state())}, {"weights", weights_fingerprint(*run.model)}}.dump());
  run.rank_dropout.clear();
  const json first = json::parse(states[0]);
  for (size_t r = 1; r < states.size(); ++r) {
    const json rank = json::parse(states[r]);
    if (rank.at("weights") != first.at("weights"))
      throw AgreedError(cat("rank ", r, "'s weights differ from rank 0's at step ", run.step,
                            ": the ranks must run the same tapegrad on the same data; ", kept_checkpoint(run)));
    run.rank_dropout.push_back(rank.at("dropout"));
  }
}

}  // namespace tapegrad
