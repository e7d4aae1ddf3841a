#pragma once
// Updaters of several CPU ranks as threads of one test process (Gloo): the connection, a tiny
// Adam setup, per-rank batches made before the threads start (no generator shared between
// threads; dropout off), and what one rank's training leaves. Shared by the tests of the
// sharded optimizer and of the out-of-memory skip.

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "data/batch_tensors.h"
#include "dist/process_group.h"
#include "model/transformer.h"
#include "train/ema.h"
#include "train/updater.h"

namespace nmt::test {

inline constexpr int64_t kRankVocab = 40;

/// Rank `rank` of `world` on 127.0.0.1:port.
inline std::shared_ptr<dist::Communicator> connect_rank(int port, int rank, int world) {
  dist::CommunicatorOptions o;
  o.master_port = port;
  o.rank = rank;
  o.world_size = world;
  o.timeout = std::chrono::seconds(30);
  return std::make_shared<dist::Communicator>(o);
}

/// A 1+1-layer model of width 16 without dropout, AdamW with weight decay, clipping and a
/// moving average, `update_freq` batches an update.
inline train::UpdaterSetup rank_setup(int rank, int world, std::shared_ptr<dist::Communicator> comm,
                                      int64_t update_freq) {
  train::UpdaterSetup u;
  u.model.encoder_layers = 1;
  u.model.decoder_layers = 1;
  u.model.d_model = 16;
  u.model.heads = 2;
  u.model.ffn_dim = 32;
  u.model.dropout = 0.0;
  u.model.max_positions = 32;
  u.train.optimizer = train::Optimizer::kAdamW;
  u.train.weight_decay = 0.01;
  u.train.clip_norm = 0.5;
  u.train.lr = 0.01;
  u.train.warmup_steps = 1;
  u.train.ema_decay = 0.9;
  u.train.seed = 3;
  u.src_vocab_size = u.tgt_vocab_size = kRankVocab;
  u.pad_id = 0;
  u.update_freq = update_freq;
  u.rank = rank;
  u.world_size = world;
  u.communicator = std::move(comm);
  return u;
}

/// `count` batches for each of `world` ranks, [rank][k], of varying shapes.
inline std::vector<std::vector<data::BatchTensors>> rank_batches(int world, int64_t count) {
  std::vector<std::vector<data::BatchTensors>> out(static_cast<size_t>(world));
  for (auto& rank : out)
    for (int64_t k = 0; k < count; ++k)
      rank.push_back(data::random_batch(3 + k % 2, 5 + k % 3, kRankVocab, kRankVocab, 1));
  return out;
}

/// Copies `from`'s parameters into `to` and restarts `to`'s moving average there: two
/// Updaters built in racing threads start alike.
inline void copy_parameters(train::Updater& from, train::Updater& to) {
  {
    at::NoGradGuard no_grad;
    auto a = from.model()->parameters();
    auto b = to.model()->parameters();
    for (size_t i = 0; i < a.size(); ++i) b[i].copy_(a[i]);
  }
  if (to.average()) to.average()->restart();
}

/// A batch source over `batches`, in order.
inline train::BatchSource batches_in_order(const std::vector<data::BatchTensors>& batches) {
  auto next = std::make_shared<size_t>(0);
  return [&batches, next] { return batches.at((*next)++); };
}

}  // namespace nmt::test
