// bench_train_step: training steps per second of a SequenceClassifier on one fixed batch, in float32.
// One step is exactly what `tapegrad train` does per batch: forward, cross_entropy, zero_grad, backward,
// AdamW step. bench/train_step_torch.py runs the same model, batch and optimizer in PyTorch; `make bench`
// runs both and prints the ratio.
//
//   bench_train_step [--d-model 32] [--heads 2] [--d-ff 64] [--layers 2] [--seq 32] [--batch 64]
//                    [--vocab 11] [--classes 8] [--warmup 20] [--steps 300] [--repeats 5] [--threads 1]
//
// The batch is a pure function of (B, T, vocab, classes), written so that the Python script builds the
// identical one: row b has length T/4 + (31·b mod (T - T/4 + 1)) (row 0 has T), token t of row b is
// 3 + ((17·b + 5·t) mod (vocab - 3)) (ids 0..2 are <pad>, <unk>, <cls>), pads are id 0 and masked,
// target b is (7·b) mod classes.
//
// Timing: the measured steps are split into `repeats` equal chunks and the median chunk's rate is
// reported (the machine is shared; the median ignores a chunk that a neighbour slowed down), both in
// wall-clock time and in the process's CPU time (all threads), which a busy machine disturbs far less:
// a descheduled process loses wall time but no CPU time.
// Memory: peak resident set (getrusage ru_maxrss) of the whole process, and its growth over the RSS at
// start-up (before the model exists), which leaves out the shared libraries.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "autograd/ops/loss.h"
#include "autograd/ops/matmul.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/tape.h"
#include "nn/classifier.h"
#include "optim/adam.h"

using namespace tapegrad;

namespace {

struct Config {
  int64_t d_model = 32, heads = 2, d_ff = 64, layers = 2, seq = 32, batch = 64, vocab = 11, classes = 8;
  int64_t warmup = 20, steps = 300, repeats = 5, threads = 1;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "bench_train_step: %s\nusage: bench_train_step [--d-model N] [--heads N] [--d-ff N] [--layers N] "
               "[--seq N] [--batch N] [--vocab N] [--classes N] [--warmup N] [--steps N] [--repeats N] "
               "[--threads N]\n",
               why);
  std::exit(2);
}

Config parse(int argc, char** argv) {
  Config c;
  const std::pair<const char*, int64_t*> flags[] = {
      {"--d-model", &c.d_model}, {"--heads", &c.heads},   {"--d-ff", &c.d_ff},       {"--layers", &c.layers},
      {"--seq", &c.seq},         {"--batch", &c.batch},   {"--vocab", &c.vocab},     {"--classes", &c.classes},
      {"--warmup", &c.warmup},   {"--steps", &c.steps},   {"--repeats", &c.repeats}, {"--threads", &c.threads},
  };
  for (int i = 1; i < argc; ++i) {
    int64_t* target = nullptr;
    for (const auto& [name, field] : flags)
      if (std::strcmp(argv[i], name) == 0) target = field;
    if (!target) usage((std::string("unknown argument ") + argv[i]).c_str());
    if (i + 1 >= argc) usage((std::string(argv[i]) + " needs a value").c_str());
    char* end = nullptr;
    *target = std::strtoll(argv[++i], &end, 10);
    if (*end != '\0') usage((std::string("not an integer: ") + argv[i]).c_str());
  }
  if (c.seq < 4 || c.batch < 1 || c.vocab < 4 || c.classes < 2 || c.steps < 1 || c.repeats < 1 ||
      c.steps % c.repeats != 0)
    usage("need --seq >= 4, --batch >= 1, --vocab >= 4, --classes >= 2, --steps a positive multiple of --repeats");
  return c;
}

/// Resident set size now, in MiB (from /proc/self/statm).
double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

/// CPU time of the whole process (every thread) so far, in seconds.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Peak resident set size of the process so far, in MiB.
double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

}  // namespace

int main(int argc, char** argv) {
  const Config c = parse(argc, argv);
  const double start_rss = rss_mib();
  set_num_threads(static_cast<int>(c.threads));

  // The fixed batch (see the file comment).   ids, pad: (B, T); targets: (B)
  const int64_t B = c.batch, T = c.seq, min_len = T / 4;
  std::vector<int64_t> token_ids(B * T), targets(B);
  std::vector<int> pads(B * T);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = b == 0 ? T : min_len + (31 * b) % (T - min_len + 1);
    for (int64_t t = 0; t < T; ++t) {
      const bool pad = t >= len;
      token_ids[b * T + t] = pad ? 0 : 3 + (17 * b + 5 * t) % (c.vocab - 3);
      pads[b * T + t] = pad;
    }
    targets[b] = (7 * b) % c.classes;
  }
  const Tensor id_tensor = ids(token_ids, {B, T}), padding = mask(pads, {B, T}), target_tensor = ids(targets, {B});

  // The default model of `tapegrad train` at this size: post-LN, relu, learned positions, mean pooling,
  // no dropout; AdamW with the trainer's lr and weight decay.
  nn::ClassifierOptions options{c.vocab};
  options.d_model = c.d_model;
  options.n_heads = c.heads;
  options.d_ff = c.d_ff;
  options.n_layers = c.layers;
  options.context_length = T;
  options.num_classes = c.classes;
  options.dropout = 0;
  Generator init(0);
  nn::SequenceClassifier model(options, init, nullptr);
  model.train();
  optim::AdamW optimizer(model.named_parameters(), {.lr = 5e-3, .weight_decay = 0.01});

  double loss_value = 0;
  auto step = [&] {
    const Tensor logits = model.forward(id_tensor, padding);
    const Tensor loss = cross_entropy(logits, target_tensor);
    optimizer.zero_grad();
    backward(loss);
    optimizer.step();
    loss_value = loss.item();
  };

  for (int64_t i = 0; i < c.warmup; ++i) step();
  const int64_t chunk = c.steps / c.repeats;
  std::vector<double> rates, cpu_rates;
  double total_seconds = 0;
  for (int64_t r = 0; r < c.repeats; ++r) {
    const double cpu0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < chunk; ++i) step();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = cpu_seconds() - cpu0;
    total_seconds += seconds;
    rates.push_back(static_cast<double>(chunk) / seconds);
    cpu_rates.push_back(static_cast<double>(chunk) / cpu);
  }
  std::sort(rates.begin(), rates.end());
  std::sort(cpu_rates.begin(), cpu_rates.end());
  const double median = rates[rates.size() / 2], cpu_median = cpu_rates[cpu_rates.size() / 2];
  const double peak = peak_rss_mib();

  std::printf("tapegrad  d_model %lld heads %lld d_ff %lld layers %lld T %lld batch %lld params %lld: %lld steps in %.3f s, "
              "median %.1f steps/s (chunks %.1f..%.1f), per CPU second %.1f, final loss %.4f\n",
              static_cast<long long>(c.d_model), static_cast<long long>(c.heads), static_cast<long long>(c.d_ff),
              static_cast<long long>(c.layers), static_cast<long long>(T), static_cast<long long>(B),
              static_cast<long long>(model.parameter_count()), static_cast<long long>(c.steps), total_seconds, median,
              rates.front(), rates.back(), cpu_median, loss_value);
  std::printf("tapegrad  peak RSS %.1f MiB (%.1f MiB above start-up)\n", peak, peak - start_rss);
  std::printf("RESULT steps_per_s=%.3f steps_per_cpu_s=%.3f peak_rss_mib=%.1f rss_growth_mib=%.1f\n", median,
              cpu_median, peak, peak - start_rss);
  return 0;
}
