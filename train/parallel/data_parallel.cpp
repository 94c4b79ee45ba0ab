#include "train/parallel/data_parallel.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <unordered_map>

#include "autograd/tape.h"

namespace tapegrad {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string on_rank(int rank, const std::string& host) { return cat("rank ", rank, " (on ", host, ")"); }

}  // namespace

std::pair<int64_t, int64_t> share_of(int64_t n, int rank, int ranks) {
  const int64_t base = n / ranks, extra = n % ranks;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

// ---- GradientAverager ----

struct GradientAverager::Bucket {
  std::vector<float> values;    // the packed gradients, then their sum
  std::vector<float> gathered;  // exact mode: every rank's values, rank 0's first
  std::vector<size_t> params;
  size_t unpacked = 0;  // parameters not packed yet this step
  std::unique_ptr<PendingCollective> pending;
};

GradientAverager::GradientAverager(Communicator& comm, const optim::NamedParameters& params,
                                   const DataParallelOptions& options)
    : comm_(comm), options_(options) {
  for (const auto& [name, p] : params) {
    if (p.dtype() != DType::float32)
      throw ValueError(cat("data-parallel training: parameter '", name, "' is ", dtype_name(p.dtype()),
                           "; gradients are averaged as float32"));
    param_index_[p.impl().autograd.get()] = params_.size();
    params_.push_back(p);
  }
  const double cap = options.overlap ? options.bucket_mb * 1e6 : std::numeric_limits<double>::infinity();
  param_slot_.resize(params_.size());
  for (size_t i = params_.size(); i-- > 0;) {  // the output layers first: their gradients complete first
    const size_t bytes = static_cast<size_t>(params_[i].numel()) * sizeof(float);
    if (buckets_.empty() ||
        (!buckets_.back().params.empty() && (buckets_.back().values.size() * sizeof(float) + bytes) > cap))
      buckets_.emplace_back();
    Bucket& bucket = buckets_.back();
    param_slot_[i] = {buckets_.size() - 1, bucket.values.size()};
    bucket.params.push_back(i);
    bucket.values.resize(bucket.values.size() + static_cast<size_t>(params_[i].numel()));
  }
  for (Bucket& bucket : buckets_) {
    bucket.unpacked = bucket.params.size();
    if (options.exact) bucket.gathered.resize(bucket.values.size() * static_cast<size_t>(comm.size()));
  }
  packed_.assign(params_.size(), 0);
}

GradientAverager::~GradientAverager() = default;

int GradientAverager::buckets() const { return static_cast<int>(buckets_.size()); }

void GradientAverager::backward(const Tensor& loss, int64_t n, int64_t m) {
  weight_ = static_cast<float>(static_cast<double>(comm_.size()) * static_cast<double>(n) / static_cast<double>(m));
  if (!options_.overlap) {
    tapegrad::backward(loss);
    return;
  }
  // Where each parameter's gradient completes: at the first (lowest) tape entry that reads it.
  const Tape& tape = Tape::current();
  std::vector<size_t> first(params_.size(), std::numeric_limits<size_t>::max());
  for (size_t i = 0; i < tape.size(); ++i)
    for (const Edge& edge : tape.entry(i).inputs)
      if (edge.meta)
        if (auto it = param_index_.find(edge.meta.get()); it != param_index_.end())
          first[it->second] = std::min(first[it->second], i);
  completes_at_.clear();
  for (size_t p = 0; p < params_.size(); ++p)
    if (first[p] != std::numeric_limits<size_t>::max()) completes_at_.emplace_back(first[p], p);
  std::sort(completes_at_.begin(), completes_at_.end(), std::greater<>());
  next_completion_ = 0;
  tapegrad::backward(loss, [this](size_t entry) { complete_up_to(entry); });
}

void GradientAverager::complete_up_to(size_t entry) {
  // Every entry at or after `entry` has run (or had no gradient to pass on): the parameters first read
  // there have their whole gradient.
  bool packed_any = false;
  for (; next_completion_ < completes_at_.size() && completes_at_[next_completion_].first >= entry;
       ++next_completion_) {
    pack(completes_at_[next_completion_].second);
    packed_any = true;
  }
  if (packed_any) start_ready_buckets();
  for (size_t b = 0; b < next_bucket_; ++b)  // MPI moves a collective along only inside its calls
    if (buckets_[b].pending) buckets_[b].pending->test();
}

void GradientAverager::pack(size_t p) {
  if (packed_[p]) return;
  packed_[p] = 1;
  const auto [b, offset] = param_slot_[p];
  Bucket& bucket = buckets_[b];
  float* out = bucket.values.data() + offset;
  const size_t n = static_cast<size_t>(params_[p].numel());
  const Tensor grad = params_[p].grad();
  if (!grad.defined()) {
    std::fill(out, out + n, 0.0f);
  } else {
    const Tensor g = grad.contiguous();
    const float* src = g.data<float>();
    if (weight_ == 1.0f)
      std::copy(src, src + n, out);
    else
      for (size_t i = 0; i < n; ++i) out[i] = weight_ * src[i];
  }
  --bucket.unpacked;
}

void GradientAverager::start_ready_buckets() {
  for (; next_bucket_ < buckets_.size() && buckets_[next_bucket_].unpacked == 0; ++next_bucket_) {
    Bucket& bucket = buckets_[next_bucket_];
    bucket.pending =
        options_.exact ? comm_.start_gather(bucket.values, bucket.gathered) : comm_.start_sum(bucket.values);
  }
}

void GradientAverager::finish(std::span<double> sums) {
  std::vector<double> numbers(sums.begin(), sums.end());
  for (size_t p = 0; p < params_.size(); ++p) {
    numbers.push_back(params_[p].grad().defined() ? 1.0 : 0.0);  // ranks with a gradient for p
    pack(p);
  }
  // The sum of these few numbers completes once every rank has finished its backward: the time it takes is
  // this rank waiting for slower ones; what the buckets take after it is the communication left to wait for.
  // Overlapping, the last buckets start before it (so that they move while this rank waits); otherwise the
  // one buffer starts after it, and its wait is the whole allreduce.
  if (options_.overlap) start_ready_buckets();
  const auto syncing = std::chrono::steady_clock::now();
  comm_.sum(numbers);
  rank_wait_seconds_ += seconds_since(syncing);
  if (!options_.overlap) start_ready_buckets();
  const double ranks = comm_.size();
  for (Bucket& bucket : buckets_) {
    const auto waiting = std::chrono::steady_clock::now();
    bucket.pending->wait();
    sum_seconds_ += seconds_since(waiting);
    bucket.pending.reset();
    if (!options_.exact) {
      for (float& v : bucket.values) v /= static_cast<float>(ranks);
      continue;
    }
    const size_t n = bucket.values.size();
    for (size_t i = 0; i < n; ++i) {  // rank order, in double, rounded once
      double total = 0;
      for (size_t r = 0; r < static_cast<size_t>(ranks); ++r) total += bucket.gathered[r * n + i];
      bucket.values[i] = static_cast<float>(total / ranks);
    }
  }

  for (size_t p = 0; p < params_.size(); ++p) {
    Tensor& param = params_[p];
    if (numbers[sums.size() + p] == 0) {  // no rank has a gradient: none, as in one process
      param.zero_grad();
      continue;
    }
    AutogradMeta& meta = *param.impl().autograd;
    if (!meta.grad.defined() || !meta.grad.is_contiguous()) meta.grad = empty(param.shape(), DType::float32);
    const auto [b, offset] = param_slot_[p];
    const float* sum = buckets_[b].values.data() + offset;
    std::copy(sum, sum + param.numel(), meta.grad.data<float>());
  }
  std::copy(numbers.begin(), numbers.begin() + static_cast<std::ptrdiff_t>(sums.size()), sums.begin());
  // Ready for the next step.
  std::fill(packed_.begin(), packed_.end(), 0);
  for (Bucket& bucket : buckets_) bucket.unpacked = bucket.params.size();
  next_bucket_ = 0;
  completes_at_.clear();
  next_completion_ = 0;
  weight_ = 1;
}

// ---- set-up ----

void broadcast_tensors(Communicator& comm, const std::vector<Tensor>& tensors) {
  size_t total = 0;
  for (const Tensor& t : tensors) total += static_cast<size_t>(t.numel()) * itemsize(t.dtype());
  std::vector<std::byte> bytes(total);
  size_t at = 0;
  for (const Tensor& t : tensors) {
    const size_t n = static_cast<size_t>(t.numel()) * itemsize(t.dtype());
    std::memcpy(bytes.data() + at, static_cast<const std::byte*>(t.data_ptr()),
                n);
    at += n;
  }
  comm.broadcast(bytes);
  at = 0;
  for (const Tensor& t : tensors) {
    const size_t n = static_cast<size_t>(t.numel()) * itemsize(t.dtype());
    std::memcpy(static_cast<std::byte*>(t.data_ptr()), bytes.data() + at, n);
    at += n;
    ++t.storage()->version;  // written in place, as copy_ would
  }
}

void agree_on_setup(Communicator& comm, const std::string& error, const std::string& settings) {
  const std::vector<std::string> all =
      comm.allgather(json{{"host", comm.host()}, {"error", error}, {"settings", settings}}.dump());
  std::vector<json> ranks;
  for (const std::string& text : all) ranks.push_back(json::parse(text));
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::string failure = ranks[r].at("error").get<std::string>();
    if (!failure.empty())
      throw AgreedError(r == 0 ? failure : cat(on_rank(static_cast<int>(r), ranks[r].at("host")), ": ", failure));
  }
  const json first = json::parse(ranks[0].at("settings").get<std::string>());
  for (size_t r = 1; r < ranks.size(); ++r) {
    const json theirs = json::parse(ranks[r].at("settings").get<std::string>());
    const json patch = json::diff(first, theirs);
    if (patch.empty()) continue;
    const std::string path = patch[0].at("path").get<std::string>();
    const json::json_pointer pointer(path);
    const std::string on_0 = first.contains(pointer) ? first.at(pointer).dump() : "nothing";
    const std::string on_r = theirs.contains(pointer) ? theirs.at(pointer).dump() : "nothing";
    const std::string who = on_rank(static_cast<int>(r), ranks[r].at("host"));
    if (path.rfind("/data", 0) == 0)
      throw AgreedError(cat(who, " read other examples than rank 0 (", path.substr(1), " ", on_r, " there, ", on_0,
                            " on rank 0): every rank must read the same data files"));
    throw AgreedError(cat(who, " was started with other settings than rank 0: ", path.substr(1), " is ", on_r,
                          " there and ", on_0, " on rank 0; every rank must run the same command"));
  }
}

void check_shared_directory(Communicator& comm, const std::string& dir) {
  std::string probe;
  std::string mine;
  if (comm.rank() == 0) {
    std::random_device random;
    probe = cat(".tapegrad-rank0-", std::hex, random(), random());
    // A new file of a random name, never through a link (O_EXCL | O_NOFOLLOW): the run directory may come
    // from elsewhere. A probe that cannot be written is seen by no rank, which the check below reports.
    const std::string path = (fs::path(dir) / probe).string();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
      [[maybe_unused]] const bool written = ::write(fd, probe.data(), probe.size()) == static_cast<ssize_t>(probe.size());
      ::close(fd);
    }
    mine = cat(probe, "\n", fs::absolute(dir).lexically_normal().string());
  }
  const std::vector<std::string> from_0 = comm.allgather(mine);
  const std::string name = from_0[0].substr(0, from_0[0].find('\n'));
  const std::string where = from_0[0].substr(from_0[0].find('\n') + 1);
  std::string seen;
  if (comm.rank() != 0) {
    std::ifstream in(fs::path(dir) / name);
    std::getline(in, seen);
  }
  const std::vector<std::string> answers = comm.allgather(comm.rank() == 0 ? name : seen);
  const std::vector<std::string> hosts = comm.allgather(comm.host());
  if (comm.rank() == 0) {
    std::error_code ignored;
    fs::remove(fs::path(dir) / name, ignored);
  }
  std::vector<std::string> blind;
  for (size_t r = 1; r < answers.size(); ++r)
    if (answers[r] != name) blind.push_back(on_rank(static_cast<int>(r), hosts[r]));
  if (blind.empty()) return;
  std::ostringstream list;
  for (size_t i = 0; i < blind.size(); ++i) list << (i ? ", " : "") << blind[i];
  throw AgreedError(cat(list.str(), (blind.size() == 1 ? " does" : " do"), " not see the run directory ", dir,
                        " that rank 0 writes (", where, " on ", hosts[0],
                        "): every rank must see the same run directory, on a file system they share "
                        "(docs/distributed.md)"));
}

}  // namespace tapegrad
