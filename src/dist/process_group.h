#pragma once
// A small communicator over LibTorch's c10d: rendezvous through a TCPStore (rendezvous.h),
// then a Gloo (CPU) or NCCL (CUDA) process group. Every failure is a DistError naming the rank and
// what failed; a collective that does not complete within the timeout fails, it never hangs.
//
//   CommunicatorOptions o;  o.master_port = 29500;  o.rank = r;  o.world_size = 2;
//   Communicator comm(o);
//   comm.broadcast(params, /*root=*/0);      // same initial weights everywhere
//   ...
//   comm.all_reduce_sum(grads);              // or GradientReducer for overlap with backward
//   comm.barrier();                          // before destroying it at the end of a run
//
// All collectives must be called in the same order on every rank, from one thread at a
// time. c10d types stay in process_group.cpp and gloo_devices.cpp (their Gloo header needs
// Debian's gloo headers).

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "dist/rendezvous.h"

namespace nmt::dist {

class KeyValueStore;
class ProgressMarks;

/// Where and how to rendezvous, and which backend to use.
struct CommunicatorOptions {
  std::string master_addr = "127.0.0.1";  ///< host of the rendezvous store (MASTER_ADDR)
  /// Port of the rendezvous store (MASTER_PORT). 0 only for one rank, or with listen_fd: the
  /// store then listens where the socket is bound (options() tells the port).
  int master_port = 29500;
  /// Rank 0: a socket already bound and listening for the store (store_socket.h), which it
  /// takes over; -1: rank 0 binds one itself, on the address master_addr names.
  int listen_fd = -1;
  int rank = 0;                           ///< this process's rank in [0, world_size)
  int world_size = 1;                     ///< processes in the job
  /// torchrun's TORCHELASTIC_USE_AGENT_STORE mode: the agent hosts the store, every rank
  /// (rank 0 included) connects as a client, under the prefix /worker/attempt_<restart_count>.
  bool agent_store = false;
  int restart_count = 0;  ///< TORCHELASTIC_RESTART_COUNT (agent_store mode only)
  std::chrono::milliseconds timeout{600000};  ///< rendezvous and each collective (ms)
  bool use_nccl = false;      ///< NCCL on `device` (CUDA); false: Gloo on CPU tensors
  c10::Device device = c10::kCPU;  ///< device of the tensors given to collectives
};

/// An all-reduce in flight. Keeps its tensor alive until it completes.
class PendingOp {
 public:
  struct Impl;
  explicit PendingOp(std::unique_ptr<Impl> impl);
  ~PendingOp();
  PendingOp(const PendingOp&) = delete;
  PendingOp& operator=(const PendingOp&) = delete;
  /// Blocks until done (on CUDA: until the current stream is ordered after it). Throws
  /// DistError naming the rank and the operation on failure or timeout. Idempotent.
  void wait();

 private:
  std::unique_ptr<Impl> impl_;
};

/// One rank's membership in a process group.
class Communicator {
 public:
  /// Rendezvous and creates the process group. Throws DistError naming the rank, the
  /// address and what failed (e.g. "rank 1: rendezvous with 127.0.0.1:29500 timed out
  /// after 30 s: 1 of 2 ranks joined (missing: 0)").
  explicit Communicator(const CommunicatorOptions& options);
  /// Creates the process group on a rendezvous already joined (rendezvous.h), with the
  /// backend that `options` asks for (use_nccl, device); the rest of the options are the
  /// rendezvous's.
  Communicator(Rendezvous joined, const CommunicatorOptions& options);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  /// This process's rank.
  int rank() const;
  /// Processes in the group.
  int world_size() const;
  /// "gloo" or "nccl".
  std::string backend_name() const;
  /// The options it was created with.
  const CommunicatorOptions& options() const;

  /// Sums each tensor over all ranks, in place; waits. Tensors may differ in shape and dtype.
  void all_reduce_sum(std::vector<at::Tensor>& tensors);
  /// Sums a small CPU tensor over all ranks, in place; waits. With tensors on a GPU (NCCL
  /// reduces device tensors only) it makes a round trip to the device.
  void all_reduce_sum_host(at::Tensor& tensor);
  /// Starts summing one contiguous tensor over all ranks, in place.
  std::shared_ptr<PendingOp> all_reduce_sum_async(at::Tensor& flat);
  /// Overwrites every rank's tensors with rank `root`'s; waits.
  void broadcast(std::vector<at::Tensor>& tensors, int root);
  /// Every rank's string, indexed by rank (through the rendezvous store).
  std::vector<std::string> all_gather_strings(const std::string& mine);
  /// Returns once every rank has called it.
  void barrier();
  /// Where each rank is (progress_marks.h): the training loop marks it, and every failure of
  /// this communicator reports who is behind.
  ProgressMarks& progress();
  /// The rendezvous store, for protocols between the ranks (key_value_store.h).
  std::shared_ptr<KeyValueStore> store() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nmt::dist
