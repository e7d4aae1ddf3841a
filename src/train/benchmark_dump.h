#pragma once
// --dump-batches: what rank 0 of a benchmark writes for scripts/bench/reference_train.py, the
// plain PyTorch loop that replays it. One safetensors file: the initial parameters, every
// batch in the order it was trained on ("batch.<i>.src", ".tgt_in", ".tgt_out"), and as
// metadata the effective config and the figures below. Every metadata key is a named constant
// here and nowhere else in C++; reference_train.py reads the same names (BenchConfig and
// ModelConfig.from_metadata, load_dump).

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "model/model_options.h"
#include "train/hardware_peak.h"
#include "train/updater.h"

namespace nmt::train {

struct BenchmarkOptions;

/// The metadata keys of a batch dump.
namespace dump_key {
inline constexpr std::string_view kConfig = "config";                  ///< effective config YAML
inline constexpr std::string_view kSrcVocab = "vocab.src_size";        ///< source pieces
inline constexpr std::string_view kTgtVocab = "vocab.tgt_size";        ///< target pieces
inline constexpr std::string_view kPadId = "vocab.pad_id";             ///< padding id
inline constexpr std::string_view kWarmup = "benchmark.warmup";        ///< untimed updates
inline constexpr std::string_view kSteps = "benchmark.steps";          ///< timed updates
inline constexpr std::string_view kPhaseSteps = "benchmark.phase_steps";  ///< synced pass updates
inline constexpr std::string_view kUpdateFreq = "benchmark.update_freq";  ///< batches per update
inline constexpr std::string_view kSynthetic = "benchmark.synthetic";  ///< "true" or "false"
inline constexpr std::string_view kThreads = "benchmark.threads";      ///< intra-op threads
/// Per batch, comma-separated: global target tokens, model FLOPs on real tokens, FLOPs of the
/// padded shapes with every score.
inline constexpr std::string_view kBatchTokens = "batch_global_tgt_tokens";
inline constexpr std::string_view kBatchFlops = "batch_training_flops";
inline constexpr std::string_view kBatchKernelFlops = "batch_kernel_flops";
/// Batch 0's products with weights only (no attention scores or context).
inline constexpr std::string_view kBatch0WeightFlops = "batch0_weight_flops";
inline constexpr std::string_view kHardwarePeak = "hardware_peak_tflops";  ///< 0: unknown
inline constexpr std::string_view kHardwarePeakSource = "hardware_peak_source";
inline constexpr std::string_view kBatches = "batches";                ///< batches in the file
}  // namespace dump_key

/// What a batch dump says about itself, besides its tensors.
struct BatchDumpInfo {
  std::string config;            ///< the effective config as YAML (model, optimizer, amp)
  int64_t src_vocab_size = 0;    ///< source pieces
  int64_t tgt_vocab_size = 0;    ///< target pieces
  int64_t pad_id = 0;            ///< padding id
  int64_t warmup = 0;            ///< untimed updates
  int64_t steps = 0;             ///< timed updates
  int64_t phase_steps = 0;       ///< updates of the synced phase pass; 0: none
  int64_t update_freq = 1;       ///< batches per update
  bool synthetic = false;        ///< fixed random batches instead of the corpus
  int64_t threads = 1;           ///< intra-op threads of rank 0
  std::vector<int64_t> batch_tokens;        ///< per batch: target tokens of all ranks
  std::vector<double> batch_flops;          ///< per batch: model FLOPs on real tokens
  std::vector<double> batch_kernel_flops;   ///< per batch: FLOPs of the padded shapes
  double batch0_weight_flops = 0;           ///< batch 0's products with weights only
  HardwarePeak hardware;                    ///< rank 0's hardware peak, for the reference's MFU

  /// The metadata map the file stores (numbers as fmt writes them, lists comma-separated).
  std::map<std::string, std::string> to_map() const;
};

/// Records rank 0's batches as they are trained on, then writes the dump.
class BatchDump {
 public:
  /// Takes the initial parameters of `updater` and the settings of the run now.
  BatchDump(Updater& updater, const model::ModelOptions& model, const std::string& config_yaml,
            const BenchmarkOptions& options, HardwarePeak hardware);

  /// Wraps `inner` so that every batch it yields is also recorded.
  BatchSource recording(BatchSource inner);
  /// Writes the file to options.dump_batches.
  void write();

 private:
  /// Adds one batch's tensors and figures.
  void record(const data::BatchTensors& batch);

  model::ModelOptions model_;
  std::filesystem::path file_;
  BatchDumpInfo info_;
  checkpoint::CheckpointData dump_;
};

}  // namespace nmt::train
