#pragma once
// The processes one training run spans. A run of one process has the SingleProcess communicator, which
// never communicates: the trainer then takes exactly the path it took before data parallelism existed.
// `mpirun -np N tapegrad train` gives N ranks on MPI (train/mpi). Every collective is called by every rank
// in the same order, as MPI demands.
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "autograd/error.h"

namespace tapegrad {

/// A collective that could not complete: a rank died, hung or stopped answering (the message says which
/// collective, how long it waited, and what to do).
struct CommunicationError : Error {
  using Error::Error;
};

/// A nonblocking collective in flight.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  /// Lets the collective progress; true once it is complete (MPI progresses only inside its calls).
  virtual bool test() = 0;
  /// Blocks until it completes; CommunicationError past the communicator's timeout.
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// This rank's host name, for messages ("rank 2 on node-b").
  virtual std::string host() const = 0;
  /// Threads for this rank when the user asks for every core (--threads 0): the cores it may run on,
  /// shared with the other ranks on its host.
  virtual int default_threads() const = 0;

  /// Every rank's `mine`, in rank order.
  virtual std::vector<std::string> allgather(const std::string& mine) = 0;
  /// Rank 0's bytes into every rank's `bytes` (of the same size on every rank).
  virtual void broadcast(std::span<std::byte> bytes) = 0;
  /// Starts summing `data` over the ranks, in place, in the order MPI chooses.
  virtual std::unique_ptr<PendingCollective> start_sum(std::span<float> data) = 0;
  /// Starts gathering every rank's `mine` into `all` (size() x mine.size(), rank 0's first).
  virtual std::unique_ptr<PendingCollective> start_gather(std::span<const float> mine, std::span<float> all) = 0;
  /// Ends every rank's process now, with `code`: the way out of a failure only this rank knows of, which
  /// would leave the others waiting in their next collective.
  [[noreturn]] virtual void abort(int code) = 0;

  /// Element-wise sums over the ranks, added in rank order in double: the same bits on every rank and in
  /// every run (an allgather: meant for a few numbers).
  void sum(std::span<double> values);
};

/// One process: rank 0 of 1. Collectives return at once; the trainer never calls them.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string host() const override;
  int default_threads() const override { return 0; }
  std::vector<std::string> allgather(const std::string& mine) override { return {mine}; }
  void broadcast(std::span<std::byte>) override {}
  std::unique_ptr<PendingCollective> start_sum(std::span<float>) override;
  std::unique_ptr<PendingCollective> start_gather(std::span<const float> mine, std::span<float> all) override;
  [[noreturn]] void abort(int code) override;
};

/// The SingleProcess communicator every run without MPI shares.
Communicator& single_process();

}  // namespace tapegrad
