#pragma once
// The dynamic tape. While grad mode is on, every op whose inputs require grad appends one entry (a Node)
// to the current thread's tape: the typed state its backward needs and the backward rule. backward()
// walks the tape once in reverse, each entry adding its inputs' gradients (+=), then releases it.
// docs/autograd.md explains the design.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/anomaly.h"
#include "autograd/kernels/grad_ptr.h"
#include "autograd/pool.h"
#include "autograd/profile.h"
#include "autograd/tensor.h"

namespace tapegrad {

// ---- grad mode ----
/// Whether ops record themselves on this thread (on by default).
bool grad_enabled();
void set_grad_enabled(bool enabled);
/// RAII: grad mode set while it lives, then restored.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};
/// RAII: no op records itself while it lives (evaluation, optimizer updates).
struct NoGradGuard : GradModeGuard {
  NoGradGuard() : GradModeGuard(false) {}
};
/// RAII: ops record themselves while it lives, even inside a NoGradGuard or a backward rule (PyTorch's
/// torch.enable_grad): checkpoint's recomputation records the forward it runs during backward.
struct EnableGradGuard : GradModeGuard {
  EnableGradGuard() : GradModeGuard(true) {}
};

/// A tensor a node saved for its backward, with the storage version it had then: reading it after an
/// in-place write throws instead of silently producing a wrong gradient.
class Saved {
 public:
  Saved() = default;
  Saved(const Tensor& t) : tensor_(t), version_(t.defined() ? t.storage()->version : 0) {}
  const Tensor& get(const char* op) const;

 private:
  Tensor tensor_;
  uint64_t version_ = 0;
};

/// One input of a tape entry: where its gradient goes (null meta: it needs none) and its shape.
struct Edge {
  std::shared_ptr<AutogradMeta> meta;
  Shape shape;
  DType dtype = DType::float32;
};

class BackwardContext;

/// One tape entry. Each op defines a node type deriving from NodeOf<ItsNode> that holds exactly what its
/// backward reads.
struct Node {
  virtual ~Node() = default;
  virtual const char* name() const = 0;
  /// Adds this entry's contribution into each input's gradient; dout = d loss / d output, contiguous,
  /// of the output's shape and dtype.
  virtual void backward(const Tensor& dout, BackwardContext& ctx) = 0;
  /// The floating-point operations of the forward's matrix products (a multiply-add is 2), for profiles
  /// (profile.h); 0 for an op without products.
  virtual double flops() const { return 0; }

  std::vector<Edge, PoolAllocator<Edge>> inputs;
  Shape out_shape;
  /// The scope path the op ran in (anomaly.h), recorded only while anomaly detection is on.
  std::shared_ptr<const std::string> scope;

  // Entries are made and released by the hundred every step: their memory is recycled (autograd/pool.h).
  static void* operator new(size_t bytes) { return pool_allocate(bytes); }
  static void operator delete(void* p, size_t bytes) noexcept { pool_release(p, bytes); }
};

/// Registers a node kind by name (see registry.h); called once per kind when the library loads.
bool register_node_kind(const char* name);

/// Base of every node type: gives it its name (Derived::kName) and registers the kind, so that the
/// registry test knows every kind of entry that exists and can demand a gradcheck for it.
template <class Derived>
struct NodeOf : Node {
  NodeOf() { (void)kind_registered; }
  const char* name() const override { return Derived::kName; }
  static inline const bool kind_registered = register_node_kind(Derived::kName);
};

/// Input k's gradient buffer as a backward rule's body sees it: a GradPtr at its first element (every
/// write is `dx[i] += v`, assigned or added as the context chose) and the buffer itself, contiguous, of
/// the input's shape and dtype, for kernels that need its shape or hand it to BLAS (with dx.beta).
template <class T, GradMode kMode>
struct GradBuffer : GradPtr<T, kMode> {
  explicit GradBuffer(Tensor& t) : GradPtr<T, kMode>(t.data<T>()), tensor(t) {}
  Tensor& tensor;
};

/// Which elements of dx a rule's body adds into.
enum class Adds {
  each_once,  // every element exactly once: elementwise and row rules, a product per block of dx
  scattered,  // some never, some several times: a scatter-add, a max, a sum over broadcast dims
};

/// Handed to Node::backward: the gradient buffers of the node's inputs. A rule only ever adds into them;
/// whether its first contribution to a new buffer may be assigned instead (no zero-fill) is decided
/// here, once, for every rule.
class BackwardContext {
 public:
  BackwardContext(const Node& node, std::vector<Tensor>& slots) : node_(node), slots_(slots) {}
  /// As above, with the node's dout (its output's gradient slot), which pass_through may hand on.
  BackwardContext(const Node& node, std::vector<Tensor>& slots, const Tensor& dout)
      : node_(node), slots_(slots), dout_(&dout) {}
  /// True when input k needs a gradient.
  bool needs_grad(size_t k) const { return k < node_.inputs.size() && node_.inputs[k].meta != nullptr; }
  /// Input k's shape (and so its gradient's).
  const Shape& input_shape(size_t k) const { return node_.inputs[k].shape; }

  /// Runs body(dx), where dx is input k's GradBuffer<T, mode> (T its float type), and body adds its
  /// contribution, `dx[i] += v`; nothing when input k needs no gradient. When the buffer is new, `adds`
  /// is each_once and no other input of this node is the same tensor, this contribution is the buffer's
  /// whole value, so dx's `+=` assigns into an unfilled buffer; otherwise it adds (into zeros at first
  /// use). The order in which a rule asks for its inputs' buffers therefore never matters, and a tensor
  /// passed twice (mul(x, x)) receives the sum of both contributions.
  template <class Body>
  void add_into(size_t k, Body&& body, Adds adds = Adds::each_once);
  /// dx_k += scale · src, summed over the dims where input k broadcasts to src (as accumulate_into).
  /// Nothing when input k needs no gradient.
  void accumulate(size_t k, const Tensor& src, double scale = 1);
  /// accumulate(k, src) for a rule whose input k gets dout unchanged, src being dout or a view of all of
  /// it in the input's shape (add, reshape, squeeze, copy): when input k's buffer is still empty and
  /// nothing but the tape holds dout, dout's memory becomes that buffer instead of being copied into a
  /// new one. The rule must call it last: it may read dout no more after it.
  void pass_through(size_t k, const Tensor& src);
  /// Memory for an intermediate of dout's shape and dtype that the rule computes from dout element by
  /// element (relu's dz = dout ⊙ [y > 0]): dout's own buffer when nothing but the tape holds it, since the
  /// tape drops dout once the rule returns; otherwise a new buffer. Either way contiguous.
  Tensor overwritable_dout() const;

 private:
  /// Where input k's gradient lives: its slot on the tape, or a leaf's .grad.
  Tensor& slot(size_t k);
  /// Input k's buffer (made at first use) and what `+=` means in it: see add_into.
  Tensor& buffer(size_t k, Adds adds, GradMode* mode);

  const Node& node_;
  std::vector<Tensor>& slots_;
  const Tensor* dout_ = nullptr;  // set by the tape's backward; pass_through copies without it
};

/// Called by backward() each time tape entry `entry` has added its inputs' gradients. Entries run from the
/// last to the first, so a leaf's .grad is complete once the lowest-numbered entry that reads it has run:
/// data-parallel training starts reducing a parameter's gradient then, while backward goes on.
using EntryDone = std::function<void(size_t entry)>;

class Tape {
 public:
  /// The tape this thread's ops record on: its own, unless a RecordOn has put another in its place.
  static Tape& current();

  size_t size() const { return entries_.size(); }
  const Node& entry(size_t i) const { return *entries_[i]; }
  /// Increments each time the tape is released; tensors remember the generation they were recorded in.
  uint64_t generation() const { return generation_; }
  /// Releases every entry (and what it saved).
  void clear();
  /// One line per entry: index, op, output shape, and where each input comes from.
  std::string dump() const;

  /// Appends `node` as the producer of `out` (which becomes a non-leaf that requires grad).
  void append(std::unique_ptr<Node> node, Tensor& out);

 private:
  friend void run_backward(const Tensor&, const Tensor&, bool, const EntryDone*);
  std::vector<std::unique_ptr<Node>> entries_;
  std::vector<Tensor> slots_;  // backward's gradient slots, kept between calls (no allocation per step)
  uint64_t generation_ = 1;
};

/// RAII: while it lives, this thread's ops record on `tape` and backward() walks it; then the previous
/// tape is current again. A backward rule that runs a forward of its own (checkpoint's recomputation)
/// records it here, apart from the tape whose backward is running.
class RecordOn {
 public:
  explicit RecordOn(Tape& tape);
  ~RecordOn();
  RecordOn(const RecordOn&) = delete;
  RecordOn& operator=(const RecordOn&) = delete;

 private:
  Tape* previous_;
};

/// Records an op: when grad mode is on and any input requires grad, creates NodeT with edges to the
/// inputs, makes `out` its output on the tape and returns the node for the op to fill in what its
/// backward needs. Otherwise returns nullptr and records nothing. Every op calls it once `out` holds its
/// values, recording or not, which makes it the place where anomaly detection checks forwards.
///   if (auto* node = record<MulScalarNode>(y, x)) node->c = c;
template <class NodeT, class... Inputs>
NodeT* record(Tensor& out, const Inputs&... inputs);

/// record() for an op with a variable number of inputs (concat).
template <class NodeT>
NodeT* record_list(Tensor& out, const std::vector<Tensor>& inputs);

/// Gradients of `root` w.r.t. every leaf that requires grad, accumulated (+=) into their .grad.
/// A non-scalar root needs `gradient` (same shape): the result is then the gradient of sum(root ⊙ gradient).
/// The tape is released afterwards unless retain_tape is set.
void backward(const Tensor& root, const Tensor& gradient = {}, bool retain_tape = false);

/// backward(root) of a scalar root, calling after_entry after each entry that ran.
void backward(const Tensor& root, const EntryDone& after_entry);

// ---- implementation of record ----
namespace detail {
/// Whether an op's output may hold ±Inf by design, which anomaly detection then does not report (a node
/// type says so with `static constexpr bool kMakesInfinity = true`, as masked_fill does for -inf masks).
template <class NodeT>
constexpr bool makes_infinity() {
  if constexpr (requires { NodeT::kMakesInfinity; }) return NodeT::kMakesInfinity;
  else return false;
}
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);
void add_edges(Node& node, std::initializer_list<const Tensor*> inputs, const char* op);
void add_edge(Node& node, const Tensor& input, const char* op);
}  // namespace detail

template <class NodeT, class... Inputs>
NodeT* record(Tensor& out, const Inputs&... inputs) {
  std::initializer_list<const Tensor*> list{&inputs...};
  if (detail::checking_forward()) [[unlikely]]
    detail::check_forward(NodeT::kName, out, list, detail::makes_infinity<NodeT>());
  if (!grad_enabled() || !detail::any_requires_grad(list)) return nullptr;
  auto node = std::make_unique<NodeT>();
  NodeT* raw = node.get();
  detail::add_edges(*raw, list, NodeT::kName);
  Tape::current().append(std::move(node), out);
  return raw;
}

template <class NodeT>
NodeT* record_list(Tensor& out, const std::vector<Tensor>& inputs) {
  if (detail::checking_forward()) [[unlikely]] {
    std::vector<const Tensor*> list;
    for (const Tensor& t : inputs) list.push_back(&t);
    detail::check_forward(NodeT::kName, out, list, detail::makes_infinity<NodeT>());
  }
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!grad_enabled() || !any) return nullptr;
  auto node = std::make_unique<NodeT>();
  NodeT* raw = node.get();
  for (const Tensor& t : inputs) detail::add_edge(*raw, t, NodeT::kName);
  Tape::current().append(std::move(node), out);
  return raw;
}

// ---- implementation of add_into ----
template <class Body>
void BackwardContext::add_into(size_t k, Body&& body, Adds adds) {
  if (!needs_grad(k)) return;
  GradMode mode = GradMode::add;
  Tensor& dx = buffer(k, adds, &mode);
  try {
    dispatch_float(dx.dtype(), node_.name(), [&](auto tag) {
      using T = decltype(tag);
      if (mode == GradMode::assign) body(GradBuffer<T, GradMode::assign>(dx));
      else body(GradBuffer<T, GradMode::add>(dx));
    });
  } catch (...) {
    if (mode == GradMode::assign) dx = Tensor();  // partly written: no gradient rather than garbage
    throw;
  }
  ++dx.storage()->version;
}

}  // namespace tapegrad
