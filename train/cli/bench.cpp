// `tapegrad bench`: its configurations and the timed run (bench.h); the machine it measures against is
// machine.cpp, the report of a run bench_report.cpp.
#include "train/cli/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/blas.h"
#include "nn/classifier.h"
#include "nn/language_model.h"
#include "optim/adam.h"
#include "train/train_options.h"
#include "train/training_memory.h"

// Counted by the tapegrad executable, which interposes the system allocator (train/cli/heap_count.cpp);
// absent from other programs, where allocations are reported as not counted.
extern "C" uint64_t tapegrad_heap_allocations() __attribute__((weak));

namespace tapegrad {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

/// The peak resident set of the process so far, in MiB.
double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

uint64_t heap_allocations() { return tapegrad_heap_allocations ? tapegrad_heap_allocations() : 0; }

/// The default model of `tapegrad train` at the configuration's size (post-LN, relu, learned positions,
/// mean pooling, no dropout).
nn::ClassifierOptions bench_model(const BenchConfig& c) {
  nn::ClassifierOptions options{c.vocab};
  options.d_model = c.d_model;
  options.n_heads = c.heads;
  options.d_ff = c.d_ff;
  options.n_layers = c.layers;
  options.context_length = c.seq;
  options.num_classes = c.classes;
  options.dropout = 0;
  return options;
}

/// The language model at the configuration's size: LanguageModelOptions' defaults (pre-LN, GELU, learned
/// positions), no dropout.
nn::LanguageModelOptions bench_language_model(const BenchConfig& c) {
  nn::LanguageModelOptions options;
  options.vocab_size = c.vocab;
  options.d_model = c.d_model;
  options.n_heads = c.heads;
  options.d_ff = c.d_ff;
  options.n_layers = c.layers;
  options.context_length = c.seq;
  options.dropout = 0;
  return options;
}

NamedRegistry<BenchConfig>& registry() {
  static NamedRegistry<BenchConfig> all("configuration", "register_bench_config");
  return all;
}

// One initialiser runs every registration of this file when the library loads.
const bool registered = [] {
  register_bench_config({.name = "small", .help = "d_model 64, 4 heads, d_ff 128, 2 layers, T 32, batch 64"});
  register_bench_config({.name = "medium",
                         .help = "d_model 256, 8 heads, d_ff 1024, 4 layers, T 128, batch 32",
                         .d_model = 256, .heads = 8, .d_ff = 1024, .layers = 4, .seq = 128, .batch = 32,
                         .warmup = 3, .steps = 20});
  // Long sequences, where attention's T² terms dominate (issue 20): 2 048 tokens a row, the rows of a batch
  // from 2 048 down to 543 tokens. A step takes about a second on 2 cores, so 2 warm-up and 50 timed
  // steps (5 chunks of 10) make one `bench --config long` about a minute.
  register_bench_config({.name = "long",
                         .help = "d_model 256, 4 heads, d_ff 1024, 2 layers, T 2048, batch 2",
                         .d_model = 256, .heads = 4, .d_ff = 1024, .layers = 2, .seq = 2048, .batch = 2,
                         .warmup = 2, .steps = 50});
  // The character language model `train --task lm` is run with on English text (about 100 characters: 96
  // here), the PyTorch twin's lm configuration and scripts/lm_parity.py's model. About a second a step on 2
  // shared cores, so 30 timed steps (5 chunks of 6); 3 warm-up steps, after which a step allocates nothing
  // (after 1, the storage cache still misses).
  register_bench_config({.name = "lm",
                         .help = "language model: d_model 128, 4 heads, d_ff 512, 4 layers, T 128, batch 32, vocab 96, "
                                 "pre-LN, GELU",
                         .d_model = 128, .heads = 4, .d_ff = 512, .layers = 4, .seq = 128, .batch = 32, .vocab = 96,
                         .language_model = true, .warmup = 3, .steps = 30});
  return true;
}();

}  // namespace

bool register_bench_config(BenchConfig config) { return registry().add(std::move(config)); }

const NamedRegistry<BenchConfig>& bench_configs() { return registry(); }

BenchConfig bench_config(const std::string& name) {
  if (const BenchConfig* config = bench_configs().find(name)) return *config;
  throw ValueError(cat("--config: ", bench_configs().unknown(name)));
}

void validate(const BenchConfig& c) {
  const auto require = [](bool ok, const char* flag, const std::string& rule, int64_t value) {
    if (!ok) throw ValueError(cat(flag, " must be ", rule, ", got ", value));
  };
  constexpr int64_t kMaxWidth = int64_t{1} << 20, kMaxLayers = 1024, kMaxThreads = 1024;
  require(c.d_model >= 1 && c.d_model <= kMaxWidth, "--d-model", cat("in [1, ", kMaxWidth, "]"), c.d_model);
  require(c.heads >= 1 && c.heads <= c.d_model, "--heads", cat("in [1, d_model = ", c.d_model, "]"), c.heads);
  if (c.d_model % c.heads != 0)
    throw ValueError(cat("--d-model ", c.d_model, " is not divisible by --heads ", c.heads,
                         ": each head gets d_model / heads dimensions"));
  require(c.d_ff >= 1 && c.d_ff <= kMaxWidth, "--ff", cat("in [1, ", kMaxWidth, "]"), c.d_ff);
  require(c.layers >= 0 && c.layers <= kMaxLayers, "--layers", cat("in [0, ", kMaxLayers, "]"), c.layers);
  require(c.seq >= 4 && c.seq <= kMaxWidth, "--context-length", cat("in [4, ", kMaxWidth, "] (a quarter of it is the shortest row)"),
          c.seq);
  require(c.batch >= 1, "--batch-size", ">= 1", c.batch);
  require(c.warmup >= 0, "--warmup", ">= 0", c.warmup);
  require(c.steps >= 1, "--steps", ">= 1", c.steps);
  require(c.threads >= 0 && c.threads <= kMaxThreads, "--threads", cat("in [0, ", kMaxThreads, "] (0: every core)"),
          c.threads);
  if (c.vocab < 4 || c.classes < 2 || c.repeats < 1)
    throw ValueError(cat("bench configuration '", c.name, "': needs vocab >= 4, classes >= 2 and repeats >= 1"));
  // The model run_bench builds, as train's memory check sees it: refused before any of it is allocated.
  TrainOptions as_trained;
  as_trained.batch_size = c.batch;
  as_trained.context_length = c.seq;
  as_trained.model = c.language_model ? nn::body_options(bench_language_model(c)) : bench_model(c);
  if (c.language_model) {  // the language model's own estimate: its V x C head and (B, T, V) logits
    as_trained.task.name = kLanguageModelTask;
    as_trained.tokenizer = "bpe";  // a vocabulary of a size given, as a configuration's
    as_trained.vocab_size = c.vocab;
  }
  check_memory(as_trained, [](std::string_view field) -> std::string {
    if (field == "vocab_size") return "--config (one of a smaller vocabulary)";
    if (field.starts_with("task.")) return "";  // a bench has no task
    return train_flag_name(field);
  });
}

// Per layer, with N = batch · T token rows, C = d_model, F = d_ff, T the sequence length:
//   q|k|v projection 2·N·C·3C, output projection 2·N·C·C, q kᵀ and P v 2 · 2·batch·T·T·C (over all heads),
//   feed-forward 2 · 2·N·C·F;  plus the head: 2·batch·C·classes (classifier, on the pooled rows) or
//   2·N·C·vocab (language model, at every position).  A step is 3 × that (see the header).
double step_flops(const BenchConfig& c, const std::vector<std::pair<int64_t, int64_t>>& rows_and_lengths) {
  const double C = static_cast<double>(c.d_model), F = static_cast<double>(c.d_ff);
  const auto layer = [&](int64_t batch, int64_t length) {
    const double T = static_cast<double>(length), N = static_cast<double>(batch) * T;
    return 2 * N * C * 3 * C + 2 * N * C * C + 4 * static_cast<double>(batch) * T * T * C + 4 * N * C * F;
  };
  double layers = 0;
  if (rows_and_lengths.empty()) layers = layer(c.batch, c.seq);
  for (const auto& [rows, length] : rows_and_lengths) layers += layer(rows, length);
  const double head = c.language_model ? 2 * static_cast<double>(c.batch * c.seq) * C * static_cast<double>(c.vocab)
                                       : 2.0 * static_cast<double>(c.batch) * C * static_cast<double>(c.classes);
  return 3 * (static_cast<double>(c.layers) * layers + head);
}

/// Rate on c.threads ÷ rate on one thread: chunks of `chunk` steps on each, alternated `repeats` times,
/// the median of the pairs' ratios. Each pair sees the same minute of a shared machine, which a ratio
/// of two separate runs does not. Leaves the pool at c.threads.
template <class Step>
double thread_scaling(Step& step, int64_t chunk, const BenchConfig& c) {
  const auto rate = [&](int threads) {
    start_threads(threads);
    step();  // the first step on a new pool makes its threads' scratch
    const auto start = Clock::now();
    for (int64_t i = 0; i < chunk; ++i) step();
    return static_cast<double>(chunk) / seconds_since(start);
  };
  std::vector<double> ratios;
  for (int64_t r = 0; r < c.repeats; ++r) {
    const double one = rate(1);
    ratios.push_back(rate(c.threads) / one);
  }
  std::sort(ratios.begin(), ratios.end());
  return ratios[ratios.size() / 2];
}

namespace {

/// What a timed step trains: the model, its encoder (for activation checkpointing) and the loss of the
/// step's batch, recorded on the tape.
struct BenchModel {
  std::unique_ptr<nn::Module> module;
  nn::TransformerEncoder* encoder = nullptr;
  std::function<Tensor()> loss;
  double flops_per_step = 0;  // what the step runs (step_flops, of the classifier's length groups)
};

/// The default model of `tapegrad train` at this size (post-LN, relu, learned positions, mean pooling, no
/// dropout) on a fixed batch, a pure function of (B, T, vocab, classes) that bench/train_step_torch.py builds
/// too: row b has length T/4 + (31·b mod (T - T/4 + 1)) (row 0 has T), token t of row b is
/// 3 + ((17·b + 5·t) mod (vocab - 3)), pads are id 0 and masked, target b is (7·b) mod classes.
BenchModel classifier_bench(const BenchConfig& c, Generator& init) {
  const int64_t B = c.batch, T = c.seq, min_len = T / 4;
  std::vector<int64_t> token_ids(B * T), targets(B);
  std::vector<int> pads(B * T);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = b == 0 ? T : min_len + (31 * b) % (T - min_len + 1);
    for (int64_t t = 0; t < T; ++t) {
      pads[b * T + t] = t >= len;
      token_ids[b * T + t] = t >= len ? 0 : 3 + (17 * b + 5 * t) % (c.vocab - 3);
    }
    targets[b] = (7 * b) % c.classes;
  }
  const Tensor id_tensor = ids(token_ids, {B, T}), padding = mask(pads, {B, T}), target_tensor = ids(targets, {B});
  auto model = std::make_unique<nn::SequenceClassifier>(bench_model(c), init, nullptr);
  const nn::SequenceClassifier* m = model.get();
  nn::TransformerEncoder* encoder = &model->encoder();
  nn::LengthGroups groups;  // the rows' groups forward runs (none: the batch whole)
  nn::length_groups(padding, groups);
  std::vector<std::pair<int64_t, int64_t>> rows_and_lengths;
  for (size_t g = 0; g < groups.size(); ++g)
    rows_and_lengths.emplace_back(groups.starts[g + 1] - groups.starts[g], groups.lengths[g]);
  return {std::move(model), encoder,
          [m, id_tensor, padding, target_tensor] { return cross_entropy(m->forward(id_tensor, padding), target_tensor); },
          step_flops(c, rows_and_lengths)};
}

/// Tokens in the language model's text (512 KiB of ids, about 500 windows at T = 128): its length changes no
/// step's work, only how often two windows of a batch overlap.
constexpr int64_t kBenchTextTokens = int64_t{1} << 16;

/// The language model (bench_language_model) on windows of T + 1 tokens at uniformly random starts of a
/// fixed text, as `train --task lm` draws them (train/data/token_windows.h), each step's loss the
/// cross-entropy of the next token at every position (NextTokenModel::loss). Token i of the text is
/// (5·i + i/7) mod vocab, which bench/train_step_torch.py builds too: a pattern the model can learn from the
/// tokens before, so the final loss falls on both sides. Each step's windows are written into the same input
/// and target tensors (the last step's tape is gone by then), so drawing a batch allocates nothing, which
/// NextTokenModel's vectors of Examples would.
BenchModel language_model_bench(const BenchConfig& c, Generator& init) {
  const int64_t B = c.batch, T = c.seq, V = c.vocab, n = std::max(kBenchTextTokens, 2 * (T + 1));
  auto text = std::make_shared<std::vector<int64_t>>(n);
  for (int64_t i = 0; i < n; ++i) (*text)[i] = (5 * i + i / 7) % V;
  const Tensor inputs = ids(std::vector<int64_t>(B * T, 0), {B, T}), targets = ids(std::vector<int64_t>(B * T, 0), {B * T});
  auto windows = std::make_shared<Generator>(1);  // any fixed seed: where the windows start changes no step's work
  auto model = std::make_unique<nn::LanguageModel>(bench_language_model(c), init, nullptr);
  const nn::LanguageModel* m = model.get();
  nn::TransformerEncoder* encoder = &model->encoder();
  return {std::move(model), encoder, [=] {
            int64_t* x = inputs.data<int64_t>();
            int64_t* y = targets.data<int64_t>();
            for (int64_t b = 0; b < B; ++b) {
              const auto start = static_cast<int64_t>(windows->below(static_cast<uint64_t>(n - T)));  // [0, n - T - 1]
              std::copy_n(text->begin() + start, T, x + b * T);
              std::copy_n(text->begin() + start + 1, T, y + b * T);
            }
            // Written in place: a node still holding them (none should) refuses them rather than read new ids.
            ++inputs.storage()->version;
            ++targets.storage()->version;
            const Tensor logits = m->forward(inputs);  // (B, T, V)
            return cross_entropy(reshape(logits, {B * T, V}), targets);
          },
          step_flops(c)};
}

}  // namespace

BenchResult run_bench(const BenchConfig& c, double peak_gflops) {
  validate(c);
  start_threads(c.threads);

  // The model and its optimizer (AdamW, lr 5e-3, weight decay 0.01: train's defaults).
  Generator init(0);
  BenchModel bench = c.language_model ? language_model_bench(c, init) : classifier_bench(c, init);
  nn::Module& model = *bench.module;
  model.train();
  // train's rule for the same model (--activation-checkpointing auto: from kCheckpointFromPositions on).
  const bool checkpointed = checkpoints_activations(c.activation_checkpointing, c.seq, false);
  bench.encoder->set_activation_checkpointing(checkpointed);
  optim::AdamW optimizer(model.named_parameters(), {.lr = 5e-3, .weight_decay = 0.01});

  double loss_value = 0;
  // In train's order (train/training_step.cpp): the last step's gradients are dropped before the forward,
  // not kept through it.
  auto step = [&] {
    {
      ProfileScope phase("zero_grad");
      optimizer.zero_grad();
    }
    const Tensor loss = bench.loss();
    backward(loss);
    {
      ProfileScope phase("optimizer step (AdamW)");
      optimizer.step();
    }
    loss_value = loss.item();
  };
  for (int64_t i = 0; i < c.warmup; ++i) step();

  // The median chunk's rate: the machine may be shared, and the median ignores a chunk a neighbour slowed.
  const int64_t chunk = std::max<int64_t>(1, c.steps / c.repeats);
  std::vector<double> rates;
  rates.reserve(c.repeats);  // the bench's own bookkeeping allocates nothing while it counts
  const uint64_t heap_before = heap_allocations(), maps_before = storage_mappings();
  for (int64_t r = 0; r < c.repeats; ++r) {
    const auto start = Clock::now();
    for (int64_t i = 0; i < chunk; ++i) step();
    rates.push_back(static_cast<double>(chunk) / seconds_since(start));
  }
  const double timed_steps = static_cast<double>(chunk * c.repeats);
  const uint64_t heap_after = heap_allocations(), maps_after = storage_mappings();
  std::sort(rates.begin(), rates.end());

  BenchResult r;
  if (c.scaling) r.thread_scaling = thread_scaling(step, chunk, c);
  if (c.profile) {  // after the counted steps: the profile's table allocates
    r.profiled_steps = c.steps;
    start_profile();
    const auto start = Clock::now();
    for (int64_t i = 0; i < c.steps; ++i) step();
    r.profiled_seconds = seconds_since(start);
    r.profile = stop_profile();
  }
  r.config = c;
  r.parameters = model.parameter_count();
  r.steps_per_second = rates[rates.size() / 2];
  r.tokens_per_second = r.steps_per_second * static_cast<double>(c.batch * c.seq);
  r.flops_per_step = bench.flops_per_step;
  r.padded_flops_per_step = step_flops(c);
  r.gflops = r.steps_per_second * r.flops_per_step / 1e9;
  r.peak_gflops = peak_gflops;
  r.utilisation = peak_gflops > 0 ? r.gflops / peak_gflops : 0;
  r.peak_rss_mib = peak_rss_mib();
  r.final_loss = loss_value;
  if (tapegrad_heap_allocations) r.heap_allocations_per_step = static_cast<double>(heap_after - heap_before) / timed_steps;
  r.storage_mappings_per_step = static_cast<double>(maps_after - maps_before) / timed_steps;
  r.threads = num_threads();
  r.checkpointed = checkpointed;
  const BlasInfo blas = blas_info();
  r.blas = blas.library;
  r.kernels = blas.kernels + " (" + blas.how_chosen + ")";
  r.blas_advice = blas.advice;
  r.cpu = cpu_info();
  return r;
}

}  // namespace tapegrad
