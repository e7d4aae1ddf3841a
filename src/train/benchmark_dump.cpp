#include "train/benchmark_dump.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/flops.h"
#include "model/transformer.h"
#include "checkpoint/tensor_groups.h"
#include "train/benchmark.h"
#include "util/log.h"

namespace nmt::train {

std::map<std::string, std::string> BatchDumpInfo::to_map() const {
  const auto key = [](std::string_view k) { return std::string(k); };
  return {
      {key(dump_key::kConfig), config},
      {key(dump_key::kSrcVocab), std::to_string(src_vocab_size)},
      {key(dump_key::kTgtVocab), std::to_string(tgt_vocab_size)},
      {key(dump_key::kPadId), std::to_string(pad_id)},
      {key(dump_key::kWarmup), std::to_string(warmup)},
      {key(dump_key::kSteps), std::to_string(steps)},
      {key(dump_key::kPhaseSteps), std::to_string(phase_steps)},
      {key(dump_key::kUpdateFreq), std::to_string(update_freq)},
      {key(dump_key::kSynthetic), synthetic ? "true" : "false"},
      {key(dump_key::kThreads), std::to_string(threads)},
      {key(dump_key::kBatchTokens), fmt::format("{}", fmt::join(batch_tokens, ","))},
      {key(dump_key::kBatchFlops), fmt::format("{}", fmt::join(batch_flops, ","))},
      {key(dump_key::kBatchKernelFlops), fmt::format("{}", fmt::join(batch_kernel_flops, ","))},
      {key(dump_key::kBatch0WeightFlops), fmt::format("{}", batch0_weight_flops)},
      {key(dump_key::kHardwarePeak), fmt::format("{}", hardware.tflops)},
      {key(dump_key::kHardwarePeakSource), hardware.source},
      {key(dump_key::kBatches), std::to_string(batch_tokens.size())},
  };
}

BatchDump::BatchDump(Updater& updater, const model::ModelOptions& model,
                     const std::string& config_yaml, const BenchmarkOptions& options,
                     HardwarePeak hardware)
    : model_(model), file_(options.dump_batches) {
  for (const auto& item : updater.model()->named_parameters())
    checkpoint::add_tensor(dump_, checkpoint::TensorGroup::kModel, item.key(),
                           item.value().detach().clone().cpu());
  const UpdaterSetup& u = updater.setup();
  info_.config = config_yaml;
  info_.src_vocab_size = u.src_vocab_size;
  info_.tgt_vocab_size = u.tgt_vocab_size;
  info_.pad_id = u.pad_id;
  info_.warmup = options.warmup;
  info_.steps = options.steps;
  info_.phase_steps = options.phase_steps;
  info_.update_freq = u.update_freq;
  info_.synthetic = options.synthetic;
  info_.hardware = std::move(hardware);
}

BatchSource BatchDump::recording(BatchSource inner) {
  return [this, inner = std::move(inner)] {
    data::BatchTensors batch = inner();
    record(batch);
    return batch;
  };
}

void BatchDump::record(const data::BatchTensors& batch) {
  const size_t i = info_.batch_tokens.size();
  dump_.tensors.emplace_back(fmt::format("batch.{}.src", i), batch.src);
  dump_.tensors.emplace_back(fmt::format("batch.{}.tgt_in", i), batch.tgt_in);
  dump_.tensors.emplace_back(fmt::format("batch.{}.tgt_out", i), batch.tgt_out);
  const int64_t vocab = info_.tgt_vocab_size;
  const auto padded_flops = [&](model::AttentionCount count) {
    return model::training_flops(model_, vocab, batch.src.size(0), batch.src.size(1),
                                 batch.tgt_out.size(1), count);
  };
  info_.batch_tokens.push_back(batch.global_tgt_tokens);
  info_.batch_flops.push_back(
      model::real_training_flops(model_, vocab, batch.src_lengths, batch.tgt_lengths));
  if (i == 0) info_.batch0_weight_flops = padded_flops(model::AttentionCount::kWeights);
  info_.batch_kernel_flops.push_back(padded_flops(model::AttentionCount::kKernel));
}

void BatchDump::write() {
  // Read now, as before: the threads at the end of the run.
  info_.threads = at::get_num_threads();
  dump_.metadata = info_.to_map();
  checkpoint::save_checkpoint(file_, dump_);
  log::info("benchmark", "wrote {} batches, the initial parameters and the config to {}",
            info_.batch_tokens.size(), file_.string());
}

}  // namespace nmt::train
