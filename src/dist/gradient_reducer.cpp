#include "dist/gradient_reducer.h"

#include <algorithm>
#include <functional>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "util/error.h"

namespace nmt::dist {

struct GradientReducer::Bucket {
  std::vector<size_t> params;  // indices into params_, in the order gradients become ready
  int64_t numel = 0;
  at::ScalarType dtype = at::kFloat;
  c10::Device device = c10::kCPU;
  size_t pending = 0;             // params not ready yet in this update
  at::Tensor buffer;              // flat gradients, reused across updates
  std::shared_ptr<PendingOp> op;  // all-reduce in flight
};

namespace {

/// Runs after an AccumulateGrad node has written .grad (the hook DDP uses).
class GradReadyHook : public torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(std::function<void()> on_ready) : on_ready_(std::move(on_ready)) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    on_ready_();
    return outputs;
  }

 private:
  std::function<void()> on_ready_;
};

}  // namespace

GradientReducer::GradientReducer(std::vector<at::Tensor> params, std::shared_ptr<Communicator> comm,
                                 GradientReducerOptions options)
    : options_(options), comm_(std::move(comm)) {
  NMT_CHECK(comm_ != nullptr, DistError, "gradient reducer: no communicator");
  NMT_CHECK(options_.bucket_mb > 0, DistError,
            "rank {}: gradient reducer: bucket_mb: expected > 0, found {}", comm_->rank(),
            options_.bucket_mb);
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    if (!p.defined() || !p.requires_grad()) continue;
    NMT_CHECK(p.is_leaf(), DistError,
              "rank {}: gradient reducer: parameter {} is not a leaf "
              "tensor",
              comm_->rank(), i);
    NMT_CHECK(p.device() == comm_->options().device, DistError,
              "rank {}: gradient reducer: parameter {} is on {}, the communicator on {}",
              comm_->rank(), i, p.device().str(), comm_->options().device.str());
    params_.push_back(p);
    param_index_.push_back(i);
  }

  // Buckets in reverse registration order: the last layers' gradients are ready first.
  const double cap_bytes = options_.bucket_mb * 1024.0 * 1024.0;
  bucket_of_.assign(params_.size(), 0);
  offset_of_.assign(params_.size(), 0);
  double bucket_bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const at::Tensor& p = params_[k];
    const double bytes = static_cast<double>(p.numel()) * static_cast<double>(p.element_size());
    const bool fits = !buckets_.empty() && buckets_.back().dtype == p.scalar_type() &&
                      buckets_.back().device == p.device() && bucket_bytes + bytes <= cap_bytes;
    if (!fits) {
      buckets_.emplace_back();
      buckets_.back().dtype = p.scalar_type();
      buckets_.back().device = p.device();
      bucket_bytes = 0;
    }
    Bucket& b = buckets_.back();
    bucket_of_[k] = buckets_.size() - 1;
    offset_of_[k] = static_cast<size_t>(b.numel);
    b.params.push_back(k);
    b.numel += p.numel();
    bucket_bytes += bytes;
  }
  ready_.assign(params_.size(), false);
  reset_locked();

  for (size_t k = 0; k < params_.size(); ++k) {
    std::shared_ptr<torch::autograd::Node> node =
        torch::autograd::impl::grad_accumulator(params_[k]);
    NMT_CHECK(node != nullptr, DistError,
              "rank {}: gradient reducer: parameter {} has no gradient accumulator", comm_->rank(),
              param_index_[k]);
    hook_keys_.push_back(
        node->add_post_hook(std::make_unique<GradReadyHook>([this, k] { on_grad_ready(k); })));
    grad_accumulators_.push_back(std::move(node));
  }
}

GradientReducer::~GradientReducer() {
  for (size_t k = 0; k < grad_accumulators_.size(); ++k) {
    std::static_pointer_cast<torch::autograd::Node>(grad_accumulators_[k])
        ->del_post_hook(hook_keys_[k]);
  }
}

void GradientReducer::set_sync(bool sync) {
  std::lock_guard<std::mutex> lock(mutex_);
  sync_ = sync;
}

size_t GradientReducer::num_buckets() const { return buckets_.size(); }

std::vector<std::vector<size_t>> GradientReducer::bucket_params() const {
  std::vector<std::vector<size_t>> result;
  for (const Bucket& b : buckets_) {
    result.emplace_back();
    for (size_t k : b.params) result.back().push_back(param_index_[k]);
  }
  return result;
}

std::vector<std::string> GradientReducer::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

void GradientReducer::clear_events() {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.clear();
}

void GradientReducer::record_locked(std::string event) { events_.push_back(std::move(event)); }

void GradientReducer::on_grad_ready(size_t k) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!sync_) return;
  if (!callback_queued_) {
    callback_queued_ = true;
    torch::autograd::Engine::get_default_engine().queue_callback([this] { on_backward_end(); });
  }
  if (!options_.overlap || !error_.empty()) return;
  const size_t b = bucket_of_[k];
  if (b < next_launch_ || ready_[k]) {
    error_ = fmt::format(
        "the gradient of parameter {} changed after its bucket {} was launched (more than "
        "one backward with sync on before finalize(); call set_sync(false) for all but the "
        "last micro-batch)",
        param_index_[k], b);
    return;
  }
  ready_[k] = true;
  if (--buckets_[b].pending == 0) launch_ready_locked();
}

void GradientReducer::on_backward_end() {
  std::lock_guard<std::mutex> lock(mutex_);
  callback_queued_ = false;
  record_locked("backward end");
  // Buckets holding parameters that got no gradient in this backward start now, in order.
  if (options_.overlap && error_.empty()) {
    while (next_launch_ < buckets_.size()) launch_locked(next_launch_++);
  }
}

void GradientReducer::launch_ready_locked() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    launch_locked(next_launch_++);
  }
}

namespace {

/// Whether `grad` is `view` itself (the bucket's slice), not a tensor of its own.
bool is_view_of(const at::Tensor& grad, const at::Tensor& view) {
  return grad.defined() && grad.data_ptr() == view.data_ptr() && grad.sizes() == view.sizes() &&
         grad.strides() == view.strides();
}

}  // namespace

at::Tensor GradientReducer::slice_locked(size_t k) {
  Bucket& b = buckets_[bucket_of_[k]];
  if (!b.buffer.defined())
    b.buffer = at::zeros({b.numel}, at::TensorOptions().dtype(b.dtype).device(b.device));
  return b.buffer.narrow(0, static_cast<int64_t>(offset_of_[k]), params_[k].numel())
      .view(params_[k].sizes());
}

void GradientReducer::zero_grad() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t k = 0; k < params_.size(); ++k) {
    const at::Tensor view = slice_locked(k);
    if (!is_view_of(params_[k].grad(), view)) params_[k].mutable_grad() = view;
  }
  for (Bucket& b : buckets_) b.buffer.zero_();
}

bool GradientReducer::holds_gradients() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t k = 0; k < params_.size(); ++k) {
    const Bucket& b = buckets_[bucket_of_[k]];
    if (!b.buffer.defined()) return false;
    const at::Tensor view =
        b.buffer.narrow(0, static_cast<int64_t>(offset_of_[k]), params_[k].numel())
            .view(params_[k].sizes());
    if (!is_view_of(params_[k].grad(), view)) return false;
  }
  return true;
}

void GradientReducer::launch_locked(size_t index) {
  Bucket& b = buckets_[index];
  for (size_t k : b.params) {
    at::Tensor slice = slice_locked(k);
    const at::Tensor& grad = params_[k].grad();
    if (is_view_of(grad, slice)) continue;  // accumulated in place by backward
    if (grad.defined()) {
      slice.copy_(grad);
    } else {
      slice.zero_();  // no gradient this update: still take part, with zeros
    }
  }
  record_locked(fmt::format("launch bucket {}", index));
  b.op = comm_->all_reduce_sum_async(b.buffer);
}

void GradientReducer::reset_locked() {
  std::fill(ready_.begin(), ready_.end(), false);
  for (Bucket& b : buckets_) {
    b.pending = b.params.size();
    b.op.reset();
  }
  next_launch_ = 0;
  error_.clear();
  // A backward that threw (a rank out of memory, train/oom_skip.h) never runs its queued
  // "backward end" callback: the next backward must queue one again.
  callback_queued_ = false;
}

void GradientReducer::finalize() {
  std::lock_guard<std::mutex> lock(mutex_);
  record_locked("finalize");
  if (!error_.empty()) {
    const std::string error = error_;
    // Launch the rest anyway so the other ranks' collectives are matched, then fail. Every
    // launched bucket is waited for, each on its own: one failed wait must not leave the
    // others writing into buffers that reset and destruction may free.
    try {
      while (next_launch_ < buckets_.size()) launch_locked(next_launch_++);
    } catch (const DistError&) {
    }
    for (Bucket& b : buckets_) {
      if (!b.op) continue;
      try {
        b.op->wait();
      } catch (const DistError&) {
      }
    }
    reset_locked();
    NMT_THROW(DistError, "rank {}: gradient reducer: {}", comm_->rank(), error);
  }
  while (next_launch_ < buckets_.size()) launch_locked(next_launch_++);
  for (size_t index = 0; index < buckets_.size(); ++index) {
    Bucket& b = buckets_[index];
    try {
      b.op->wait();
    } catch (const DistError& e) {
      reset_locked();
      NMT_THROW(DistError, "{} (gradient bucket {} of {}, {:.2f} MB)", e.what(), index,
                buckets_.size(),
                static_cast<double>(b.numel) * b.buffer.element_size() / (1024.0 * 1024.0));
    }
    for (size_t k : b.params) {
      at::Tensor& p = params_[k];
      const at::Tensor sum = slice_locked(k);
      if (is_view_of(p.grad(), sum)) continue;  // summed where it is
      if (p.grad().defined()) {
        p.mutable_grad().copy_(sum);
      } else {
        p.mutable_grad() = sum;  // from now on the gradient lives in the bucket
      }
    }
  }
  record_locked("finalize done");
  reset_locked();
}

}  // namespace nmt::dist
