#pragma once
// Data parallelism over a Communicator (docs/distributed.md). Every rank holds the whole model and the
// same data stream; each takes its share of every batch, and after backward the gradients are averaged
// over the ranks, so that every rank applies the same update and the weights stay identical, as one
// process training on the whole batch would.
//
// The average. Rank r's share holds n_r of the batch's m examples and its backward gives g_r, the gradient
// of its mean loss. The whole batch's mean loss has the gradient
//   g = Σ_r (n_r / m) · g_r = (1/N) · Σ_r w_r · g_r,   w_r = N · n_r / m   (1 when the batch splits evenly)
// Each rank scales its gradients by w_r, the ranks sum them, and each multiplies the sum by 1/N.
//
// Overlap. Backward runs the tape from its last entry to its first, so a parameter's gradient is complete
// once the first entry that reads it has run. Parameters are packed into buckets in reverse order of
// registration (the output layers, whose gradients complete first, in the first bucket), and a bucket's
// sum starts as soon as its gradients and those of every earlier bucket are complete, while backward goes
// on through the earlier layers (as PyTorch's DistributedDataParallel does). Buckets start in one fixed
// order on every rank, as MPI requires of collectives.
//
// Exactness. MPI adds the ranks' buffers in an order of its choosing (it may depend on the buffer's size
// and the network). In exact mode each bucket is gathered whole to every rank, which adds the ranks'
// values in rank order in double and rounds once: the sum is then the same bits on every rank, in every
// run, whatever MPI's algorithm. docs/distributed.md states how close N ranks x batch b come to one rank
// x batch N·b, and a test checks it.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/tensor.h"
#include "optim/optimizer.h"
#include "train/parallel/communicator.h"

namespace tapegrad {

struct DataParallelOptions {
  bool overlap = true;   // sum buckets while backward goes on; false: one buffer, summed after backward
  bool exact = false;    // a fixed reduction order (gather, then add in rank order in double)
  double bucket_mb = 1;  // gradient megabytes per bucket when overlapping
};

/// Rank `rank`'s share [begin, end) of a batch of n examples split over `ranks`: consecutive ranges, the
/// first n % ranks ranks taking one more, so that the shares in rank order are the batch.
std::pair<int64_t, int64_t> share_of(int64_t n, int rank, int ranks);

/// Averages the parameters' gradients over the ranks each step (see the header comment).
class GradientAverager {
 public:
  /// Float32 parameters only (what the trainer trains); a ValueError names any other.
  GradientAverager(Communicator& comm, const optim::NamedParameters& params, const DataParallelOptions& options);
  ~GradientAverager();

  /// backward(loss) of this rank's share, which holds n of the batch's m examples, starting each bucket's
  /// sum as soon as it can. Not called on a rank whose share is empty.
  void backward(const Tensor& loss, int64_t n, int64_t m);
  /// Completes the step's reduction: each parameter's .grad becomes the average g above; a parameter that
  /// no rank has a gradient for keeps none, as in one process. `sums` are a few numbers of the step (the
  /// loss, a stop request) summed over the ranks in rank order along the way.
  void finish(std::span<double> sums);

  /// Seconds finish() waited, over all steps: for the other ranks to finish their backward (a slower rank, a
  /// busy core), then for the gradient sums once every rank had (the communication backward did not hide).
  double rank_wait_seconds() const { return rank_wait_seconds_; }
  double sum_seconds() const { return sum_seconds_; }
  int buckets() const;

 private:
  struct Bucket;
  void complete_up_to(size_t entry);
  void pack(size_t param);
  void start_ready_buckets();

  Communicator& comm_;
  DataParallelOptions options_;
  std::vector<Tensor> params_;
  std::vector<Bucket> buckets_;
  std::unordered_map<const AutogradMeta*, size_t> param_index_;  // a parameter's autograd state -> its index
  std::vector<std::pair<size_t, size_t>> param_slot_;            // param -> (bucket, offset)
  std::vector<std::pair<size_t, size_t>> completes_at_;          // (tape entry, param), highest entry first
  std::vector<char> packed_;
  size_t next_completion_ = 0, next_bucket_ = 0;
  float weight_ = 1;
  double rank_wait_seconds_ = 0, sum_seconds_ = 0;
};

/// Rank 0's values of these tensors (contiguous) on every rank: the initial, resumed or --init weights, and
/// the optimizer's state, so that every rank starts from rank 0's.
void broadcast_tensors(Communicator& comm, const std::vector<Tensor>& tensors);

/// Thrown on every rank when the ranks agreed that the run cannot start; rank 0 prints the message, the
/// others exit with the same code in silence, so that one line says what is wrong.
struct AgreedError : Error {
  using Error::Error;
};

/// After each rank has tried to set up the run (`error`: empty, or what went wrong on it): when any rank
/// failed, an AgreedError on every rank with the first failure, naming the rank and host when it is not
/// rank 0's. Then `settings` (a JSON object: the options and the data's fingerprints) must be the same on
/// every rank: an AgreedError names the first that differs and the ranks' values.
void agree_on_setup(Communicator& comm, const std::string& error, const std::string& settings);

/// Checks that every rank sees the run directory `dir` that rank 0 created (a file rank 0 writes there
/// must be readable by all): an AgreedError naming the ranks that cannot, since a run needs one directory
/// that every rank can read when it resumes.
void check_shared_directory(Communicator& comm, const std::string& dir);

}  // namespace tapegrad
