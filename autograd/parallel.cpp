// The thread pool behind parallel_for: workers that sleep on a condition variable between jobs, each job
// split into one contiguous range per thread (static partitioning: the row kernels and product parts of
// a training step are uniform, and a fixed split keeps a thread's results independent of timing).
#include "autograd/parallel.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tapegrad {

namespace {

thread_local bool inside_parallel_region = false;

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
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i, seen = generation_] { work(i, seen); });
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
      pending_ = static_cast<int>(parts) - 1;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    run_part(0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
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
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        if (index >= parts_) continue;  // this job has fewer parts than threads
      }
      run_part(index);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
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
  int pending_ = 0;
  uint64_t generation_ = 0;
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

}  // namespace tapegrad
