// nmt-ckpt: inspect (info), compare (diff) and average checkpoints of nmt-train, print the
// names of their tensors (layout), import a Hugging Face model as a checkpoint (import-hf) and
// export one to Hugging Face transformers (export-hf).
#include <filesystem>
#include <iostream>
#include <vector>

#include <fmt/ranges.h>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checkpoint_tools.h"
#include "checkpoint/tensor_groups.h"
#include "config/ckpt_cli.h"
#include "hf/hf_export.h"
#include "hf/hf_import.h"
#include "util/error.h"
#include "util/log.h"
#include "util/main_guard.h"

namespace {

using namespace nmt;

int run(int argc, char** argv) {
  const config::CkptCommand command = config::parse_ckpt_command(argc, argv);
  if (command.exit_code) return *command.exit_code;
  log::init(log::LogOptions{});
  switch (command.action) {
    case config::CkptAction::kInfo:
      std::cout << checkpoint::checkpoint_info_json(command.inputs.at(0)) << std::flush;
      return 0;
    case config::CkptAction::kDiff: {
      const checkpoint::DiffReport report = checkpoint::diff_checkpoints(
          command.inputs.at(0), command.inputs.at(1), {command.atol, command.all_tensors});
      std::cout << report.json << std::flush;
      return report.same ? 0 : 1;
    }
    case config::CkptAction::kLayout:
      std::cout << checkpoint::tensor_layout_json() << std::flush;
      return 0;
    case config::CkptAction::kAverage: {
      const std::vector<std::filesystem::path> inputs(command.inputs.begin(), command.inputs.end());
      NMT_CHECK(command.force || !std::filesystem::exists(command.output), ConfigError,
                "{} exists: give another output file, or --force to replace it", command.output);
      checkpoint::save_checkpoint(command.output, checkpoint::average_checkpoints(inputs));
      log::info("ckpt", "wrote {}: the average of {} checkpoints", command.output, inputs.size());
      return 0;
    }
    case config::CkptAction::kImportHf:
      std::cout << hf::import_summary_json(
                       hf::import_hf_model({command.inputs.at(0), command.output, command.force}))
                << std::flush;
      return 0;
    case config::CkptAction::kExportHf: {
      const hf::HfExportResult result = hf::export_hf(
          {command.inputs.at(0), command.output, command.average, command.weights, command.force});
      log::info("ckpt", "wrote {}: a transformers {} model ({} checkpoint(s), {} weights): {}",
                command.output, result.model_type, result.checkpoints.size(),
                result.moving_average ? "moving-average" : "trained",
                fmt::join(result.files, ", "));
      return 0;
    }
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  return nmt::run_main("nmt-ckpt", [&] { return run(argc, argv); });
}
