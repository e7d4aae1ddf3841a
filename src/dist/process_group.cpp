#include "dist/process_group.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <optional>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/ranges.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
// ProcessGroupGloo.hpp includes <gloo/...>, which the wheel does not ship: Debian's
// libgloo-dev provides them. That is sound here because this file only touches gloo through
// shared_ptr<gloo::transport::Device> values that LibTorch itself creates and owns
// (createDeviceForHostname/Interface, Options::devices); every gloo member of
// ProcessGroupGloo is behind a shared_ptr, so its layout does not depend on gloo's version.
// We never link Debian's libgloo. Do not call inline ProcessGroupGloo members that reach into
// gloo objects (e.g. setTimeout) from here.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#ifdef NMT_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "dist/gloo_devices.h"
#include "dist/key_value_store.h"
#include "dist/progress_marks.h"
#include "dist/rendezvous.h"
#include "dist/store_values.h"
#include "util/duration.h"
#include "util/error.h"
#include "util/log.h"

namespace nmt::dist {
namespace {

std::string reason(const std::exception& e) { return one_line_reason(e); }

/// The most a coalesced collective copies at once: a flat copy of a whole model (the initial
/// broadcast of the parameters, a sharded optimizer's share) would cost every rank that much
/// memory on top, at its peak.
constexpr int64_t kCoalescedBytes = int64_t{64} << 20;

/// Groups tensors by (dtype, device) in order of first appearance, each group up to
/// kCoalescedBytes (a larger tensor alone); a flat copy per group is handed to `run`, then
/// copied back. One collective per group instead of one per tensor.
template <class Run>
void coalesced(std::vector<at::Tensor>& tensors, Run run) {
  std::vector<bool> done(tensors.size(), false);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (done[i]) continue;
    std::vector<size_t> group;
    int64_t bytes = 0;
    for (size_t j = i; j < tensors.size(); ++j) {
      if (done[j] || tensors[j].scalar_type() != tensors[i].scalar_type() ||
          tensors[j].device() != tensors[i].device())
        continue;
      const int64_t size = tensors[j].numel() * static_cast<int64_t>(tensors[j].element_size());
      if (!group.empty() && bytes + size > kCoalescedBytes) continue;
      group.push_back(j);
      done[j] = true;
      bytes += size;
    }
    if (group.size() == 1 && tensors[i].is_contiguous()) {
      run(tensors[i]);
      continue;
    }
    std::vector<at::Tensor> pieces;
    for (size_t j : group) pieces.push_back(tensors[j].reshape(-1));
    at::Tensor flat = at::cat(pieces);
    run(flat);
    int64_t offset = 0;
    for (size_t j : group) {
      const int64_t n = tensors[j].numel();
      tensors[j].copy_(flat.narrow(0, offset, n).view(tensors[j].sizes()));
      offset += n;
    }
  }
}

/// The rendezvous store behind KeyValueStore; a failure is a DistError naming the rank, the
/// operation, the key and the store.
class C10dKeyValueStore final : public KeyValueStore {
 public:
  C10dKeyValueStore(c10::intrusive_ptr<c10d::Store> store, int rank, std::string where,
                    std::chrono::milliseconds timeout)
      : store_(std::move(store)), rank_(rank), where_(std::move(where)), timeout_(timeout) {}

  void set(const std::string& key, const std::string& value) override {
    try {
      store_->set(key, value);
    } catch (const std::exception& e) {
      fail("set", key, e);
    }
  }

  std::optional<std::string> get_if_set(const std::string& key) override {
    std::string value;
    try {
      if (!store_->check({key})) return std::nullopt;
      const std::vector<uint8_t> bytes = store_->get(key);
      value.assign(bytes.begin(), bytes.end());
    } catch (const std::exception& e) {
      fail("get", key, e);
    }
    // Each protocol checks its own, smaller bound (store_values.h).
    check_value_size(rank_, key, value, kMaxGatherBytes, "any value the ranks exchange");
    return value;
  }

  std::string set_once(const std::string& key, const std::string& value) override {
    try {
      // compareSet on a missing key with an empty expectation sets it: the first rank wins,
      // and every rank reads back the winner's value.
      const std::vector<uint8_t> now =
          store_->compareSet(key, {}, std::vector<uint8_t>(value.begin(), value.end()));
      return std::string(now.begin(), now.end());
    } catch (const std::exception& e) {
      fail("set_once", key, e);
    }
  }

 private:
  [[noreturn]] void fail(const char* op, const std::string& key, const std::exception& e) const {
    NMT_THROW(DistError, "rank {}: {} of '{}' in the store at {} failed (timeout {}): {}", rank_,
              op, key, where_, format_seconds(timeout_), reason(e));
  }

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
  std::string where_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------

struct PendingOp::Impl {
  c10::intrusive_ptr<c10d::Work> work;
  at::Tensor tensor;  // kept alive while the backend uses it
  std::string what;   // "rank 1: all_reduce_sum of 1024 float elements"
  std::chrono::milliseconds timeout;
  std::function<std::string()> progress;  // the ranks' progress, for the error message
  bool stream_wait = false;  // NCCL: the compute stream waits, not the host (see wait())
  bool waited = false;
};

PendingOp::PendingOp(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PendingOp::~PendingOp() = default;

void PendingOp::wait() {
  if (impl_->waited) return;
  try {
    // NCCL's wait() with a timeout blocks the host until the collective is done, a host-device
    // sync every update; without one it makes the current stream wait for NCCL's and returns,
    // and a hang is caught by NCCL's watchdog (dist.timeout_s) after the HangMonitor has said
    // who is behind. Gloo works on the host: its wait is the collective.
    if (impl_->stream_wait) impl_->work->wait();
    else impl_->work->wait(impl_->timeout);
  } catch (const std::exception& e) {
    impl_->waited = true;
    NMT_THROW(DistError, "{} failed (timeout {}): {}{}", impl_->what,
              format_seconds(impl_->timeout), reason(e), impl_->progress ? impl_->progress() : "");
  }
  impl_->waited = true;
}

// ---------------------------------------------------------------------------------------------

struct Communicator::Impl {
  CommunicatorOptions options;
  c10::intrusive_ptr<c10d::Store> store;    // rendezvous store (with the agent prefix)
  c10::intrusive_ptr<c10d::Backend> backend;
  std::string backend_name;
  int64_t gather_calls = 0;

  std::string where() const {
    return fmt::format("{}:{}", options.master_addr, options.master_port);
  }
  [[noreturn]] void fail(const std::string& op, const std::exception& e) const {
    NMT_THROW(DistError, "rank {}: {} failed (timeout {}): {}{}", options.rank, op,
              format_seconds(options.timeout), reason(e), progress_report());
  }
  /// The store as the ranks' protocols see it (key_value_store.h).
  std::shared_ptr<KeyValueStore> key_value_store;
  /// Where each rank is; every failure reports it. Declared last: its HangMonitor (NCCL)
  /// stops before the rest goes away.
  std::unique_ptr<ProgressMarks> progress;
  std::string progress_report() const { return progress ? progress->report() : ""; }
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& op) const {
    try {
      work->wait(options.timeout);
    } catch (const std::exception& e) {
      fail(op, e);
    }
  }
  void check_tensor(const at::Tensor& t, const char* op) const {
    NMT_CHECK(t.defined(), DistError, "rank {}: {}: undefined tensor", options.rank, op);
    NMT_CHECK(t.device() == options.device, DistError,
              "rank {}: {}: expected a tensor on {}, found one on {}", options.rank, op,
              options.device.str(), t.device().str());
  }
};

namespace {

/// The backend's part of the options (the rendezvous checked the rest).
void validate_backend(const CommunicatorOptions& o) {
  if (o.use_nccl) {
#ifndef NMT_WITH_CUDA
    NMT_THROW(DistError, "rank {}: NCCL requested, but nmt-train was built without CUDA "
              "(NMT_WITH_CUDA=OFF); use the Gloo backend", o.rank);
#else
    NMT_CHECK(o.device.is_cuda(), DistError,
              "rank {}: NCCL needs a CUDA device, found device {}", o.rank, o.device.str());
    const int count = c10::cuda::device_count();
    NMT_CHECK(count > 0, DistError, "rank {}: NCCL requested, but no CUDA device is visible",
              o.rank);
    NMT_CHECK(o.device.index() >= 0 && o.device.index() < count, DistError,
              "rank {}: NCCL on {}: expected a device index in [0, {})", o.rank,
              o.device.str(), count);
#endif
  } else {
    // Gloo sums CUDA tensors too (through host memory): 2 ranks can share one GPU, which NCCL
    // refuses.
    NMT_CHECK(o.device.is_cpu() || o.device.is_cuda(), DistError,
              "rank {}: the Gloo backend works on CPU or CUDA tensors, found device {}", o.rank,
              o.device.str());
  }
}

/// A rendezvous joined only with options whose backend part is sound: a bad device fails
/// before this rank makes the others wait for it.
Rendezvous join_checked(const CommunicatorOptions& options) {
  validate_backend(options);
  return Rendezvous(options);
}

}  // namespace

Communicator::Communicator(const CommunicatorOptions& options)
    : Communicator(join_checked(options), options) {}

Communicator::Communicator(Rendezvous joined, const CommunicatorOptions& options)
    : impl_(std::make_unique<Impl>()) {
  validate_backend(options);
  Impl& m = *impl_;
  m.options = joined.options();  // its master_port is the one bound
  m.options.use_nccl = options.use_nccl;
  m.options.device = options.device;
  m.store = joined.store();
  const CommunicatorOptions& o = m.options;

  // The process group, on its own key space of the store.
  auto pg_store = c10::make_intrusive<c10d::PrefixStore>("nmt/pg", m.store);
  try {
    if (o.use_nccl) {
#ifdef NMT_WITH_CUDA
      c10::cuda::set_device(o.device.index());
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = o.timeout;
      m.backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(pg_store, o.rank, o.world_size,
                                                             nccl_options);
      m.backend_name = "nccl";
#endif
    } else {
      auto gloo_options = c10d::ProcessGroupGloo::Options::create(o.timeout);
      gloo_options->devices = gloo_devices(o.master_addr, o.master_port);
      m.backend = c10::make_intrusive<c10d::ProcessGroupGloo>(pg_store, o.rank, o.world_size,
                                                             gloo_options);
      m.backend_name = "gloo";
    }
  } catch (const DistError&) {
    throw;
  } catch (const std::exception& e) {
    NMT_THROW(DistError, "rank {}: creating the {} process group (store {}) failed: {}", o.rank,
              o.use_nccl ? "NCCL" : "Gloo", m.where(), reason(e));
  }
  log::debug("dist", "rank {}: {} process group of {} ranks ready (store {})", o.rank,
             m.backend_name, o.world_size, m.where());
  m.key_value_store = std::make_shared<C10dKeyValueStore>(m.store, o.rank, m.where(), o.timeout);
  // NCCL: a stall of the marks is reported at four fifths of the timeout, before NCCL's
  // watchdog aborts the process.
  std::optional<std::chrono::milliseconds> watch;
  if (o.use_nccl) watch = std::max(std::chrono::milliseconds(1000), o.timeout * 4 / 5);
  m.progress = std::make_unique<ProgressMarks>(m.key_value_store, o.rank, o.world_size, watch);
}

Communicator::~Communicator() = default;

int Communicator::rank() const { return impl_->options.rank; }
int Communicator::world_size() const { return impl_->options.world_size; }
std::string Communicator::backend_name() const { return impl_->backend_name; }
const CommunicatorOptions& Communicator::options() const { return impl_->options; }

void Communicator::all_reduce_sum(std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors) impl_->check_tensor(t, "all_reduce_sum");
  coalesced(tensors, [&](at::Tensor& flat) { all_reduce_sum_async(flat)->wait(); });
}

std::shared_ptr<PendingOp> Communicator::all_reduce_sum_async(at::Tensor& flat) {
  Impl& m = *impl_;
  m.check_tensor(flat, "all_reduce_sum");
  NMT_CHECK(flat.is_contiguous(), DistError, "rank {}: all_reduce_sum: expected a contiguous "
            "tensor", m.options.rank);
  auto op = std::make_unique<PendingOp::Impl>();
  op->tensor = flat;
  op->timeout = m.options.timeout;
  op->stream_wait = m.options.use_nccl;
  op->progress = [&m] { return m.progress_report(); };
  op->what = fmt::format("rank {}: all_reduce_sum of {} {} elements", m.options.rank,
                         flat.numel(), c10::toString(flat.scalar_type()));
  std::vector<at::Tensor> one{flat};
  c10d::AllreduceOptions ao;
  ao.reduceOp = c10d::ReduceOp::SUM;
  ao.timeout = m.options.timeout;
  try {
    op->work = m.backend->allreduce(one, ao);
  } catch (const std::exception& e) {
    NMT_THROW(DistError, "{} failed to start: {}", op->what, reason(e));
  }
  return std::make_shared<PendingOp>(std::move(op));
}

void Communicator::broadcast(std::vector<at::Tensor>& tensors, int root) {
  Impl& m = *impl_;
  NMT_CHECK(root >= 0 && root < m.options.world_size, DistError,
            "rank {}: broadcast: root must be in [0, {}), found {}", m.options.rank,
            m.options.world_size, root);
  for (const at::Tensor& t : tensors) m.check_tensor(t, "broadcast");
  coalesced(tensors, [&](at::Tensor& flat) {
    const std::string op = fmt::format("broadcast of {} elements from rank {}", flat.numel(), root);
    std::vector<at::Tensor> one{flat};
    c10d::BroadcastOptions bo;
    bo.rootRank = root;
    bo.timeout = m.options.timeout;
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = m.backend->broadcast(one, bo);
    } catch (const std::exception& e) {
      m.fail(op, e);
    }
    m.wait(work, op);
  });
}

std::vector<std::string> Communicator::all_gather_strings(const std::string& mine) {
  Impl& m = *impl_;
  const int64_t call = m.gather_calls++;
  std::vector<std::string> all(m.options.world_size);
  const auto key = [call](int r) { return fmt::format("nmt/gather/{}/{}", call, r); };
  check_value_size(m.options.rank, key(m.options.rank), mine, kMaxGatherBytes,
                   "a string that all_gather_strings exchanges");
  try {
    m.store->set(key(m.options.rank), mine);
    for (int r = 0; r < m.options.world_size; ++r) {
      const std::vector<uint8_t> bytes = m.store->get(key(r));
      all[r].assign(bytes.begin(), bytes.end());
    }
  } catch (const std::exception& e) {
    m.fail(fmt::format("all_gather_strings #{} through the store at {}", call, m.where()), e);
  }
  for (int r = 0; r < m.options.world_size; ++r)
    check_value_size(m.options.rank, key(r), all[r], kMaxGatherBytes,
                     "a string that all_gather_strings exchanges");
  return all;
}

ProgressMarks& Communicator::progress() { return *impl_->progress; }

std::shared_ptr<KeyValueStore> Communicator::store() const { return impl_->key_value_store; }

void Communicator::all_reduce_sum_host(at::Tensor& tensor) {
  const c10::Device device = options().device;
  std::vector<at::Tensor> tensors{device.is_cuda() ? tensor.to(device) : tensor};
  all_reduce_sum(tensors);
  if (!tensors[0].is_same(tensor)) tensor.copy_(tensors[0]);
}

void Communicator::barrier() {
  Impl& m = *impl_;
  c10d::BarrierOptions bo;
  bo.timeout = m.options.timeout;
  if (m.options.use_nccl) bo.device_ids = {m.options.device.index()};
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = m.backend->barrier(bo);
  } catch (const std::exception& e) {
    m.fail("barrier", e);
  }
  m.wait(work, "barrier");
}

}  // namespace nmt::dist
