#include "autograd/tape.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "autograd/elementwise_map.h"
#include "autograd/pool.h"

namespace tapegrad {

namespace {
thread_local bool grad_mode = true;
}

bool grad_enabled() { return grad_mode; }
void set_grad_enabled(bool enabled) { grad_mode = enabled; }

const Tensor& Saved::get(const char* op) const {
  if (tensor_.defined() && tensor_.storage()->version != version_)
    throw AutogradError(cat(op, " backward: a tensor it saved (shape ", tensor_.shape(),
                            ") was modified in place after the forward pass; its gradient would be wrong"));
  return tensor_;
}

namespace {
thread_local Tape* recording_on = nullptr;  // set by RecordOn; null: the thread's own tape
}

Tape& Tape::current() {
  thread_local Tape own;
  return recording_on ? *recording_on : own;
}

RecordOn::RecordOn(Tape& tape) : previous_(recording_on) { recording_on = &tape; }
RecordOn::~RecordOn() { recording_on = previous_; }

void Tape::clear() {
  // Release from the newest entry back, so that no destructor chain depends on an older entry.
  while (!entries_.empty()) entries_.pop_back();
  ++generation_;
}

void Tape::append(std::unique_ptr<Node> node, Tensor& out) {
  node->out_shape = out.shape();
  if (detect_anomaly()) [[unlikely]] node->scope = detail::current_scope_path();
  auto meta = make_pooled<AutogradMeta>();
  meta->node = static_cast<int64_t>(entries_.size());
  meta->tape_generation = generation_;
  out.impl().autograd = std::move(meta);
  if (detail::profile_on) [[unlikely]] detail::profile_recorded(*node);
  entries_.push_back(std::move(node));
}

std::string Tape::dump() const {
  std::ostringstream out;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Node& node = *entries_[i];
    out << '#' << i << ' ' << node.name() << ' ' << node.out_shape << " <-";
    for (const Edge& edge : node.inputs) {
      if (!edge.meta) out << " const" << edge.shape;
      else if (edge.meta->node < 0) out << " leaf" << edge.shape;
      else out << " #" << edge.meta->node << edge.shape;
    }
    out << '\n';
  }
  return out.str();
}

namespace detail {

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

void add_edge(Node& node, const Tensor& t, const char* op) {
  Edge edge;
  if (t.defined()) {
    edge.shape = t.shape();
    edge.dtype = t.dtype();
    if (t.requires_grad()) {
      const auto& meta = t.impl().autograd;
      if (meta->node >= 0 && meta->tape_generation != Tape::current().generation())
        throw AutogradError(cat(op, ": an input (shape ", t.shape(),
                                ") was computed on a tape that backward() already released; "
                                "recompute it, or detach() it to use it as a constant"));
      edge.meta = meta;
    }
  }
  node.inputs.push_back(std::move(edge));
}

void add_edges(Node& node, std::initializer_list<const Tensor*> inputs, const char* op) {
  node.inputs.reserve(inputs.size());
  for (const Tensor* t : inputs) add_edge(node, *t, op);
}

}  // namespace detail

Tensor& BackwardContext::slot(size_t k) {
  AutogradMeta& meta = *node_.inputs[k].meta;
  return meta.node < 0 ? meta.grad : slots_[meta.node];
}

Tensor& BackwardContext::buffer(size_t k, Adds adds, GradMode* mode) {
  const Edge& edge = node_.inputs[k];
  Tensor& slot = this->slot(k);
  *mode = GradMode::add;
  if (slot.defined()) return slot;
  // A new buffer may take this contribution by assignment only when it is the buffer's whole value: it
  // covers every element once, and no other input of this node is the same tensor (that input's
  // contribution must add to this one, whether its rule asks before or after).
  bool alone = adds == Adds::each_once;
  for (size_t j = 0; alone && j < node_.inputs.size(); ++j) alone = j == k || node_.inputs[j].meta != edge.meta;
  if (!alone) {
    slot = zeros(edge.shape, edge.dtype);
    return slot;
  }
  slot = empty(edge.shape, edge.dtype);
#ifndef NDEBUG
  // Debug builds fill it with NaN: a body that misses an element it promised to write shows up as a NaN
  // gradient (and a failing gradcheck) instead of whatever the memory held.
  dispatch_float(edge.dtype, node_.name(), [&](auto tag) {
    using T = decltype(tag);
    std::fill_n(slot.data<T>(), slot.numel(), std::numeric_limits<T>::quiet_NaN());
  });
#endif
  *mode = GradMode::assign;
  return slot;
}

void BackwardContext::accumulate(size_t k, const Tensor& src, double scale) {
  if (!needs_grad(k)) return;
  const Shape& shape = input_shape(k);
  const bool once = broadcast_shapes(shape, src.shape(), node_.name()) == shape;  // no dim of dx is summed
  GradMode mode = GradMode::add;
  Tensor& dx = buffer(k, once ? Adds::each_once : Adds::scattered, &mode);
  write_into(dx, mode, src, scale);
}

void BackwardContext::pass_through(size_t k, const Tensor& src) {
  if (!needs_grad(k)) return;
  const Edge& edge = node_.inputs[k];
  Tensor& slot = this->slot(k);
  // dout may be handed on when this is the buffer's first use and src is all of dout, laid out as the
  // buffer must be, and when no other handle can see dout's memory: only the tape's slot holds dout, and
  // only dout and src hold its storage (a seed that shares a caller's tensor fails this, for one).
  const bool adopt = dout_ && !slot.defined() && src.defined() && src.storage() == dout_->storage() &&
                     src.offset() == dout_->offset() && src.numel() == dout_->numel() &&
                     src.dtype() == edge.dtype && src.shape() == edge.shape && src.is_contiguous() &&
                     dout_->impl_ptr().use_count() == 1 &&
                     dout_->storage().use_count() == (src.same(*dout_) ? 1 : 2);
  if (!adopt) {
    accumulate(k, src);
    return;
  }
  auto impl = make_pooled<TensorImpl>();
  impl->storage = src.storage();
  impl->shape = edge.shape;
  impl->strides = contiguous_strides(edge.shape);
  impl->offset = src.offset();
  impl->dtype = edge.dtype;
  slot = Tensor(std::move(impl));
}

Tensor BackwardContext::overwritable_dout() const {
  if (dout_ && dout_->is_contiguous() && dout_->impl_ptr().use_count() == 1 && dout_->storage().use_count() == 1)
    return *dout_;
  return empty(node_.out_shape, dout_ ? dout_->dtype() : DType::float32);
}

namespace {

/// Anomaly detection's backward check: every gradient buffer that node's backward added into.
void check_gradients(const Node& node, std::vector<Tensor>& slots) {
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const AutogradMeta* meta = node.inputs[k].meta.get();
    if (meta) detail::check_gradient(node, k, meta->node < 0 ? meta->grad : slots[meta->node]);
  }
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& gradient, bool retain_tape, const EntryDone* after_entry) {
  if (!root.requires_grad())
    throw AutogradError(cat("backward: the tensor (shape ", root.shape(),
                            ") does not require grad: no input of the ops that made it requires grad, "
                            "or it was computed under NoGradGuard"));
  Tensor seed;
  NoGradGuard no_grad;  // neither the seed nor the backward rules are themselves recorded
  // Nor are their ops checked one by one by anomaly detection: the seed is, and each rule's gradients.
  detail::BackwardRunning running;
  const bool check = detect_anomaly();
  if (!gradient.defined()) {
    if (root.numel() != 1)
      throw AutogradError(cat("backward: output of shape ", root.shape(),
                              " is not a scalar; pass a gradient of the same shape"));
    seed = ones(root.shape(), root.dtype());
  } else {
    if (!(gradient.shape() == root.shape()))
      throw AutogradError(cat("backward: gradient shape ", gradient.shape(), " differs from output shape ",
                              root.shape()));
    seed = gradient.to(root.dtype()).contiguous().detach();
  }
  if (check) [[unlikely]] detail::check_seed(seed);

  AutogradMeta& meta = *root.impl().autograd;
  if (meta.node < 0) {  // a leaf: its gradient is the seed itself
    if (!meta.grad.defined()) meta.grad = zeros(root.shape(), root.dtype());
    accumulate_into(meta.grad, seed);
    return;
  }
  Tape& tape = Tape::current();
  if (meta.tape_generation != tape.generation() || meta.node >= static_cast<int64_t>(tape.size()))
    throw AutogradError(
        "backward: the tape that recorded this tensor was already released by an earlier backward(); "
        "run the forward pass again (or pass retain_tape = true to the first backward)");

  // slots[i] holds d loss / d (output of entry i) until entry i has run; then it is released.
  std::vector<Tensor> slots = std::move(tape.slots_);
  slots.assign(static_cast<size_t>(meta.node + 1), Tensor());
  slots[meta.node] = seed;
  // Every slot is empty again at the end; the capacity is kept for the next call.
  const auto release = [&] {
    tape.slots_ = std::move(slots);
    if (!retain_tape) tape.clear();
  };
  if (detail::profile_on) [[unlikely]] detail::profile_backward_starts();
  for (int64_t i = meta.node; i >= 0; --i) {
    if (!slots[i].defined()) continue;
    Node& node = *tape.entries_[i];
    BackwardContext ctx(node, slots, slots[i]);
    node.backward(slots[i], ctx);
    if (detail::profile_on) [[unlikely]] detail::profile_backward_ran(node);
    slots[i] = Tensor();
    if (after_entry) (*after_entry)(static_cast<size_t>(i));
    if (check) [[unlikely]] {
      try {
        check_gradients(node, slots);
      } catch (const AnomalyError&) {
        // Leave the tape as a finished backward would, so that the next step starts from a clean one.
        for (Tensor& slot : slots) slot = Tensor();
        release();
        throw;
      }
    }
    // Nothing reads an entry once it has run: dropping it now frees what it saved while backward goes on,
    // so the activations of the layers done give their memory to the gradients of the next.
    if (!retain_tape) tape.entries_[i].reset();
  }
  release();
}

void backward(const Tensor& root, const Tensor& gradient, bool retain_tape) {
  run_backward(root, gradient, retain_tape, nullptr);
}

void backward(const Tensor& root, const EntryDone& after_entry) { run_backward(root, {}, false, &after_entry); }

void Tensor::backward() const { tapegrad::backward(*this); }
void Tensor::backward(const Tensor& gradient) const { tapegrad::backward(*this, gradient); }

}  // namespace tapegrad
