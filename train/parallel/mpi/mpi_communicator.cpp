// The ranks of `mpirun` over MPI (Debian's OpenMPI). Every collective is nonblocking underneath and waited
// for by polling, so that no wait is endless: past the timeout, or when a signal arrived while the other
// ranks stay silent (mpirun signals every rank when one dies), the wait ends with a CommunicationError
// instead of hanging.
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <thread>

#include "train/io/interrupt.h"
#include "train/parallel/mpi/launch.h"

namespace tapegrad {

namespace {

using Clock = std::chrono::steady_clock;

/// After a signal, how long the other ranks may stay silent before this one stops waiting. When a rank
/// dies, mpirun sends the others SIGTERM one second later and SIGKILL one second after that
/// (odls_base_sigkill_timeout): half a second leaves a rank blocked in a collective the time to say where
/// it stopped and which checkpoint is intact before it is killed.
constexpr double kSilenceAfterSignal = 0.5;

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<size_t>(length));
}

class MpiCommunicator;

/// A nonblocking collective and the buffers it reads and writes until it completes.
class MpiPending final : public PendingCollective {
 public:
  MpiPending(const MpiCommunicator& comm, const char* what) : comm_(comm), what_(what) {}
  // A request still active here belongs to a run that failure is stopping (MPI_Abort follows); MPI forbids
  // freeing or cancelling an active collective, so it is left as it is.
  ~MpiPending() override = default;
  MPI_Request* request() { return &request_; }
  bool test() override;
  void wait() override;

 private:
  const MpiCommunicator& comm_;
  const char* what_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(double timeout_seconds) : timeout_(timeout_seconds) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) throw ValueError("MPI is already initialised: one communicator per process");
    int provided = 0;
    if (const int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided); code != MPI_SUCCESS)
      throw CommunicationError(cat("MPI_Init failed: ", mpi_error(code)));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);  // errors become messages, not aborts
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    MPI_Get_processor_name(name, &length);
    host_.assign(name, static_cast<size_t>(length));
    MPI_Comm local;  // the ranks on this host, which share its cores
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &local_ranks_);
    MPI_Comm_free(&local);
  }
  ~MpiCommunicator() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string host() const override { return host_; }

  /// mpirun binds each of one or two ranks to cores of its own: then they are this rank's. Otherwise the
  /// host's cores are shared out among its ranks.
  int default_threads() const override {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    cpu_set_t set;
    const int allowed = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : cores;
    if (allowed < cores) return std::max(1, allowed);
    return std::max(1, cores / std::max(1, local_ranks_));
  }

  std::vector<std::string> allgather(const std::string& mine) override {
    const int64_t length = static_cast<int64_t>(mine.size());
    std::vector<int64_t> lengths(static_cast<size_t>(size_));
    MpiPending sizes(*this, "gathering from every rank");
    check(MPI_Iallgather(&length, 1, MPI_INT64_T, lengths.data(), 1, MPI_INT64_T, MPI_COMM_WORLD, sizes.request()),
          "MPI_Iallgather");
    sizes.wait();
    std::vector<int> counts, offsets;
    int64_t total = 0;
    for (int64_t n : lengths) {
      if (n < 0 || total + n > INT_MAX) throw CommunicationError("allgather: more than 2 GB of set-up information");
      counts.push_back(static_cast<int>(n));
      offsets.push_back(static_cast<int>(total));
      total += n;
    }
    std::string all(static_cast<size_t>(total), '\0');
    MpiPending bytes(*this, "gathering from every rank");
    check(MPI_Iallgatherv(mine.data(), static_cast<int>(length), MPI_CHAR, all.data(), counts.data(), offsets.data(),
                          MPI_CHAR, MPI_COMM_WORLD, bytes.request()),
          "MPI_Iallgatherv");
    bytes.wait();
    std::vector<std::string> result;
    for (size_t r = 0; r < counts.size(); ++r)
      result.push_back(all.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(counts[r])));
    return result;
  }

  void broadcast(std::span<std::byte> bytes) override {
    constexpr size_t kChunk = size_t{1} << 30;  // MPI counts are ints
    for (size_t at = 0; at < bytes.size(); at += kChunk) {
      MpiPending pending(*this, "receiving rank 0's weights");
      check(MPI_Ibcast(bytes.data() + at, static_cast<int>(std::min(kChunk, bytes.size() - at)), MPI_BYTE, 0,
                       MPI_COMM_WORLD, pending.request()),
            "MPI_Ibcast");
      pending.wait();
    }
  }

  std::unique_ptr<PendingCollective> start_sum(std::span<float> data) override {
    auto pending = std::make_unique<MpiPending>(*this, "summing the gradients");
    check(MPI_Iallreduce(MPI_IN_PLACE, data.data(), count(data.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                         pending->request()),
          "MPI_Iallreduce");
    return pending;
  }

  std::unique_ptr<PendingCollective> start_gather(std::span<const float> mine, std::span<float> all) override {
    auto pending = std::make_unique<MpiPending>(*this, "gathering the gradients");
    check(MPI_Iallgather(mine.data(), count(mine.size()), MPI_FLOAT, all.data(), count(mine.size()), MPI_FLOAT,
                         MPI_COMM_WORLD, pending->request()),
          "MPI_Iallgather");
    return pending;
  }

  void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; should it, the process still ends
  }

  double timeout() const { return timeout_; }
  std::string who() const { return cat("rank ", rank_, " (on ", host_, ")"); }

 private:
  static int count(size_t n) {
    if (n > static_cast<size_t>(INT_MAX)) throw CommunicationError("a gradient bucket of more than 2^31 numbers");
    return static_cast<int>(n);
  }
  void check(int code, const char* call) const {
    if (code != MPI_SUCCESS) throw CommunicationError(cat(who(), ": ", call, " failed: ", mpi_error(code)));
  }

  int rank_ = 0, size_ = 1, local_ranks_ = 1;
  std::string host_;
  double timeout_;
};

bool MpiPending::test() {
  if (request_ == MPI_REQUEST_NULL) return true;
  int done = 0;
  if (const int code = MPI_Test(&request_, &done, MPI_STATUS_IGNORE); code != MPI_SUCCESS)
    throw CommunicationError(cat(comm_.who(), ": ", what_, " failed: ", mpi_error(code)));
  return done != 0;
}

void MpiPending::wait() {
  const Clock::time_point start = Clock::now();
  Clock::time_point signalled{};
  for (int polls = 0; !test(); ++polls) {
    const Clock::time_point now = Clock::now();
    const double waited = std::chrono::duration<double>(now - start).count();
    if (interrupt_received() && signalled == Clock::time_point{}) signalled = now;
    const bool silent_after_signal = signalled != Clock::time_point{} &&
                                     std::chrono::duration<double>(now - signalled).count() > kSilenceAfterSignal;
    if (silent_after_signal)
      throw CommunicationError(cat(comm_.who(), ": stopped by ", signal_name(interrupt_received()),
                                   " while waiting for the other ranks (", what_,
                                   "), which stayed silent: mpirun "
                                   "stops every rank when one fails, and its message names it"));
    if (waited > comm_.timeout())
      throw CommunicationError(cat(comm_.who(), ": no answer from the other ranks for ", comm_.timeout(), " s while ",
                                   what_, " (--comm-timeout): a rank has died, hung or lost the network"));
    // Spin briefly (a sum of a small model takes microseconds), then yield the core to whoever computes.
    if (polls < 1000)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace

bool built_with_mpi() { return true; }

std::unique_ptr<Communicator> connect_ranks(double timeout_seconds) {
  return std::make_unique<MpiCommunicator>(timeout_seconds);
}

}  // namespace tapegrad
