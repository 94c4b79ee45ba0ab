// The thread pool behind parallel_for: workers that sleep on a condition variable between jobs, each job
// split into one contiguous range per thread (static partitioning: the row kernels and product parts of
// a training step are uniform, and a fixed split keeps a thread's results independent of timing).
//
// A training step runs hundreds of jobs a few tens of microseconds apart, and waking a sleeping thread
// through the kernel costs about as much as a small job (measured: the demo model ran 25% slower on two
// threads than on one). So a worker that finishes a job, and the caller waiting for a job's last part,
// first watch for the next event for a short while (kSpin) before they sleep: back-to-back jobs then
// start without a system call, and an idle pool still sleeps within a fraction of a millisecond. Not
// longer: at 100 µs the workers of the `small` model still fall asleep 3 to 8 times a step on a Zen 4 (in
// the gaps where the caller works alone) and take 43-75 µs on average to wake, but with 1 ms, two such
// processes sharing 2 cores (ctest -j2, two trainings at once) each ran at 5.8 steps/s instead of 30:
// a thread that spins holds the core the other process's thread waits for.
#include "autograd/parallel.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tapegrad {

namespace {

thread_local bool inside_parallel_region = false;

constexpr auto kSpin = std::chrono::microseconds(100);

/// Polls `ready` for up to kSpin; true as soon as it holds. Between rounds of polls the thread offers its
/// core to any other thread that is ready to run (sched_yield: a system call that returns at once when none
/// is), so that a spinning thread does not hold a core another process needs. Two `small` benchmarks
/// sharing 2 cores ran at 31-32 steps/s each without the yield and at 54-67 with it; one alone ran as fast
/// either way (94-115 against 97-109 steps/s, alternated, on a Zen 4).
template <class Ready>
bool spin_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      __builtin_ia32_pause();
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    sched_yield();
  }
}

int cores_available() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

class Pool {
 public:
  explicit Pool(int threads) { resize(threads); }
  ~Pool() { stop_workers(); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int threads) {
    std::lock_guard<std::mutex> job_lock(job_mutex_);  // not while a job runs
    stop_workers();
    stopping_ = false;
    // A new worker waits for the next job, not the last one.
    const uint64_t current = generation_.load();
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i, current] { work(i, current); });
  }

  void run(int64_t n, int64_t grain, const RangeFn& fn) {
    const int64_t parts = std::min<int64_t>(size(), n / grain);
    if (parts <= 1) {
      fn(0, n);
      return;
    }
    std::unique_lock<std::mutex> job_lock(job_mutex_);  // one job at a time (callers on several threads)
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fn_ = &fn;
      n_ = n;
      parts_ = parts;
      // Every worker answers every job, those without a part too: none can still be reading this job's
      // fields when the next one is written.
      pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
      error_ = nullptr;
      generation_.fetch_add(1, std::memory_order_release);  // publishes the job to spinning workers
    }
    wake_.notify_all();  // and to sleeping ones
    run_part(0);
    auto finished = [this] { return pending_.load(std::memory_order_acquire) == 0; };
    if (!spin_until(finished)) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, finished);
    }
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void run_part(int64_t part) {
    const int64_t begin = n_ * part / parts_, end = n_ * (part + 1) / parts_;
    inside_parallel_region = true;
    try {
      if (begin < end) (*fn_)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    inside_parallel_region = false;
  }

  void work(int index, uint64_t seen) {
    for (;;) {
      auto next_job = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!spin_until(next_job)) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || next_job(); });
        if (stopping_) return;
      }
      ++seen;  // jobs cannot be skipped: each waits for every worker
      if (index < parts_) run_part(index);  // a job may have fewer parts than threads
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);  // the caller may be about to sleep: it checks under the lock
        done_.notify_one();
      }
    }
  }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex job_mutex_, mutex_;
  std::condition_variable wake_, done_;
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0, parts_ = 0;
  std::atomic<int> pending_{0};
  std::atomic<uint64_t> generation_{0};
  bool stopping_ = false;
  std::exception_ptr error_;
};

Pool& pool() {
  // BLAS runs single-threaded inside our parts: its own pool must not compete with this one.
  static Pool instance([] {
    openblas_set_num_threads(1);
    return cores_available();
  }());
  return instance;
}

}  // namespace

void set_num_threads(int threads) {
  const int wanted = threads > 0 ? threads : cores_available();
  if (wanted != pool().size()) pool().resize(wanted);
}

int num_threads() { return pool().size(); }

void parallel_for(int64_t n, int64_t grain, RangeFn fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (inside_parallel_region || n <= grain) {
    fn(0, n);
    return;
  }
  pool().run(n, grain, fn);
}

void parallel_for_each_dynamic(int64_t n, int64_t grain, RangeFn fn) {
  if (n <= 0) return;
  const int64_t threads = inside_parallel_region || n <= grain ? 1 : std::min<int64_t>(n, num_threads());
  std::atomic<int64_t> next{0};
  parallel_for(threads, 1, [&](int64_t, int64_t) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n; i = next.fetch_add(1, std::memory_order_relaxed))
      fn(i, i + 1);
  });
}

}  // namespace tapegrad
