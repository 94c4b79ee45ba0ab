#pragma once
// tapegrad's threads. One pool owns every thread the library computes on: matrix products are split
// across it (BLAS itself runs single-threaded inside each part) and so are the row kernels. A second
// owner would fight this one for the cores: an OpenMP region beside OpenBLAS's own thread pool made a
// GEMM + elementwise loop 2.25× slower than either alone.
#include <cstdint>
#include <memory>
#include <type_traits>

namespace tapegrad {

/// Sets the number of threads tapegrad computes on (0: every core the process may run on).
void set_num_threads(int threads);
/// The number set (at least 1); all cores until set_num_threads is called.
int num_threads();

/// A reference to the body of a parallel_for: fn(begin, end). It neither owns nor copies the callable (so
/// it never allocates, unlike std::function with a large capture); the callable outlives the call.
class RangeFn {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RangeFn>>>
  RangeFn(F&& fn)  // NOLINT: implicit, so that a lambda passes as is
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(fn)))),
        call_([](void* object, int64_t begin, int64_t end) { (*static_cast<std::remove_reference_t<F>*>(object))(begin, end); }) {}
  void operator()(int64_t begin, int64_t end) const { call_(object_, begin, end); }

 private:
  void* object_;
  void (*call_)(void*, int64_t, int64_t);
};

/// Calls fn(begin, end) on disjoint ranges covering [0, n), in parallel across the pool, and returns when
/// every call has. Each range holds at least `grain` items (the last may hold fewer), so work too small
/// to share runs on the calling thread alone. A call made from inside a parallel_for runs serially. The
/// first exception thrown by fn is rethrown here after every range has finished.
void parallel_for(int64_t n, int64_t grain, RangeFn fn);

/// Calls fn(i, i + 1) for every i in [0, n), handing items to the pool's threads one at a time as each
/// finishes its last: for items of uneven cost (attention heads of a padded batch, query blocks under a
/// causal mask), where parallel_for's equal ranges would leave one thread with the costly ones. Which thread
/// runs an item depends on timing, so each call must write only its own item's outputs. As with
/// parallel_for, n <= grain runs on the calling thread alone.
void parallel_for_each_dynamic(int64_t n, int64_t grain, RangeFn fn);

/// The grain for items of about `flops` floating-point operations each: enough items per range for about
/// 2 MFLOP (some 20 µs of one core). The pool's workers spin between the jobs of a step, so a job costs
/// about a microsecond to hand out, and a product split in two keeps nearly all of the BLAS's speed down
/// to that size. Measured on 2 cores (docs/performance.md): at 2 MFLOP, with the row kernels split too,
/// the `small` bench model trains 1.5-1.9x faster on two threads than on one and the demo model 1.3x;
/// at 64 MFLOP (the earlier grain, when the row kernels ran on one thread) neither split at all.
inline int64_t grain_for_flops(int64_t flops) {
  constexpr int64_t kFlopsPerRange = 2'000'000;
  return flops >= kFlopsPerRange ? 1 : kFlopsPerRange / (flops > 0 ? flops : 1);
}

/// The grain for memory-bound items (elementwise maps, row kernels) of `elements` elements each: about
/// kElementsPerRange elements a range (tens of microseconds of loads and stores).
inline constexpr int64_t kElementsPerRange = 16'384;
inline int64_t grain_for_elements(int64_t elements) {
  return elements >= kElementsPerRange ? 1 : kElementsPerRange / (elements > 0 ? elements : 1);
}

}  // namespace tapegrad
