#include "config/ckpt_cli.h"

#include <functional>
#include <memory>

#include <CLI/CLI.hpp>

#include "config/cli_exit.h"

namespace nmt::config {
namespace {

// Each subcommand's help ends with its own section; the top-level help with all of them.
constexpr const char* kInfoDoc =
    "  nmt-ckpt info PATH\n"
    "      JSON: path, step, epoch, config_hash (from the metadata; null when absent),\n"
    "      parameters (elements of the model.* tensors), parameter_hash (XXH64 over the\n"
    "      model.* tensors' names, dtypes, shapes and bytes, in name order), tensors, bytes\n"
    "      (file size) and all metadata.\n";

constexpr const char* kDiffDoc =
    "  nmt-ckpt diff A B [--atol X] [--all]\n"
    "      JSON: the max absolute difference of each model.* tensor (every tensor with\n"
    "      --all), computed in float64, the overall max_abs_diff and the mismatches (names\n"
    "      in one file only, differing shapes or dtypes). Exit code 0 when names, dtypes and\n"
    "      shapes match and every difference is <= X (default 0), else 1.\n";

constexpr const char* kAverageDoc =
    "  nmt-ckpt average OUT IN... [--force]\n"
    "      Writes OUT with the element-wise mean of the inputs' model.* tensors (computed in\n"
    "      float64, stored in each tensor's dtype; integer tensors must be equal). Metadata:\n"
    "      the last input's plus averaged_from (the inputs, comma-separated). Optimizer and\n"
    "      other state is dropped, so OUT is for translation, not for resuming. An existing\n"
    "      OUT is refused unless --force.\n";

constexpr const char* kLayoutDoc =
    "  nmt-ckpt layout\n"
    "      JSON: how checkpoint tensors are named: the groups (model., ema., optim., scaler.,\n"
    "      rng., vocab.) with what each holds, the optimizer slots, the scaler fields, the\n"
    "      vocabulary files and the pattern of the rng names.\n";

constexpr const char* kImportDoc =
    "  nmt-ckpt import-hf HF_DIR -o OUT [--force]\n"
    "      Writes OUT, a checkpoint of the transformers model in HF_DIR (as save_pretrained\n"
    "      writes it: config.json, model.safetensors, tokenizer files) of model_type marian\n"
    "      (OPUS-MT) or m2m_100 (M2M100, NLLB-200), for train.init_from and nmt-translate.\n"
    "      What we do not compute exactly is refused naming the file and key; a\n"
    "      pytorch_model.bin without safetensors is refused. JSON: output, model_type,\n"
    "      tokenizer, parameters, vocabulary sizes, languages, and model_yaml (the model:\n"
    "      section a fine-tuning config must repeat). An existing OUT is refused; --force\n"
    "      replaces it only when it is a checkpoint import-hf wrote (metadata\n"
    "      imported_from). OUT may not be, hold or lie inside HF_DIR (by real path).\n";

constexpr const char* kExportHfDoc =
    "  nmt-ckpt export-hf IN OUT [--average K] [--weights auto|ema|raw] [--force]\n"
    "      Writes OUT, a Hugging Face transformers model directory (config.json,\n"
    "      model.safetensors, generation_config.json, tokenizer files) that\n"
    "      AutoModelForSeq2SeqLM and AutoTokenizer load. IN is a checkpoint file or a run\n"
    "      directory, picked as nmt-translate picks it. Post-norm models with positions\n"
    "      marian export as MarianMT, pre-norm ones with positions m2m100 (tied, no output\n"
    "      bias) as M2M100; any other is refused, naming the keys to change. The weights\n"
    "      keep their dtype (config.json's dtype). An existing OUT is refused; --force\n"
    "      replaces it only when it is empty or an earlier export (it holds .nmt-export-hf).\n"
    "      OUT may not be or hold the checkpoints read, nor be, hold or lie inside the run's\n"
    "      checkpoints/ folder (compared by real path; runs/demo/hf is fine).\n";

/// One subcommand: its CLI11 app, and what it makes of the command once it was the one parsed
/// (its positional arguments, kept until then).
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<void(CkptCommand&)> finish;
};

Subcommand add_info(CLI::App& app, const std::string& errors_doc) {
  CLI::App* info = app.add_subcommand("info", "print a JSON summary of one checkpoint");
  auto path = std::make_shared<std::string>();
  info->add_option("PATH", *path, "checkpoint file")->required();
  info->footer(kInfoDoc + errors_doc);
  return {info, [path](CkptCommand& command) {
            command.action = CkptAction::kInfo;
            command.inputs = {*path};
          }};
}

Subcommand add_diff(CLI::App& app, CkptCommand& command, const std::string& errors_doc) {
  CLI::App* diff = app.add_subcommand(
      "diff", "compare the model.* tensors of two checkpoints (exit code 0: same within --atol)");
  auto a = std::make_shared<std::string>(), b = std::make_shared<std::string>();
  diff->add_option("A", *a, "first checkpoint")->required();
  diff->add_option("B", *b, "second checkpoint")->required();
  diff->add_option("--atol", command.atol,
                   "largest absolute difference still counted as equal (default 0)")
      ->check(CLI::NonNegativeNumber)
      ->type_name("X");
  diff->add_flag("--all", command.all_tensors,
                 "compare every tensor (optimizer state too), not only model.*");
  diff->footer(kDiffDoc + errors_doc);
  return {diff, [a, b](CkptCommand& parsed) {
            parsed.action = CkptAction::kDiff;
            parsed.inputs = {*a, *b};
          }};
}

Subcommand add_average(CLI::App& app, CkptCommand& command, const std::string& errors_doc) {
  CLI::App* average =
      app.add_subcommand("average", "write OUT with the mean of the model.* tensors of the inputs");
  auto out = std::make_shared<std::string>();
  auto in = std::make_shared<std::vector<std::string>>();
  average->add_option("OUT", *out, "checkpoint to write (atomically)")->required();
  average->add_option("IN", *in, "checkpoints to average")->required()->expected(1, -1);
  average->add_flag("--force", command.force, "replace OUT if it exists");
  average->footer(kAverageDoc + errors_doc);
  return {average, [out, in](CkptCommand& parsed) {
            parsed.action = CkptAction::kAverage;
            parsed.output = *out;
            parsed.inputs = *in;
          }};
}

Subcommand add_layout(CLI::App& app, const std::string& errors_doc) {
  CLI::App* layout =
      app.add_subcommand("layout", "print how checkpoint tensors are named, as JSON");
  layout->footer(kLayoutDoc + errors_doc);
  return {layout, [](CkptCommand& parsed) { parsed.action = CkptAction::kLayout; }};
}

Subcommand add_import_hf(CLI::App& app, CkptCommand& command, const std::string& errors_doc) {
  CLI::App* import_hf = app.add_subcommand(
      "import-hf", "write a checkpoint of a Hugging Face MarianMT, M2M100 or NLLB model directory");
  auto dir = std::make_shared<std::string>();
  import_hf
      ->add_option("HF_DIR", *dir,
                   "model directory (config.json, model.safetensors, "
                   "tokenizer files)")
      ->required();
  import_hf->add_option("-o,--output", command.output, "checkpoint file to write (atomically)")
      ->required()
      ->type_name("OUT");
  import_hf->add_flag("--force", command.force,
                      "replace OUT if it is a checkpoint that import-hf wrote");
  import_hf->footer(kImportDoc + errors_doc);
  return {import_hf, [dir](CkptCommand& parsed) {
            parsed.action = CkptAction::kImportHf;
            parsed.inputs = {*dir};
          }};
}

Subcommand add_export_hf(CLI::App& app, CkptCommand& command, const std::string& errors_doc) {
  CLI::App* export_hf = app.add_subcommand(
      "export-hf", "write a Hugging Face transformers model directory of a checkpoint");
  auto in = std::make_shared<std::string>(), out = std::make_shared<std::string>();
  auto weights = std::make_shared<std::string>("auto");
  export_hf->add_option("IN", *in, "checkpoint file or run directory")->required();
  export_hf->add_option("OUT", *out, "model directory to write")->required();
  export_hf
      ->add_option("--average", command.average,
                   "export the element-wise mean of the newest K checkpoints of the run directory")
      ->check(CLI::NonNegativeNumber)
      ->type_name("K");
  export_hf
      ->add_option("--weights", *weights,
                   "ema: the moving average of train.ema_decay; raw: the trained parameters; "
                   "auto: ema when the checkpoint has it, else raw")
      ->check(CLI::IsMember({"auto", "ema", "raw"}))
      ->capture_default_str()
      ->type_name("auto|ema|raw");
  export_hf->add_flag("--force", command.force, "replace OUT if it is empty or an earlier export");
  export_hf->footer(kExportHfDoc + errors_doc);
  return {export_hf, [in, out, weights](CkptCommand& parsed) {
            parsed.action = CkptAction::kExportHf;
            parsed.inputs = {*in};
            parsed.output = *out;
            parsed.weights = *weights == "ema"   ? decode::WeightsChoice::kEma
                             : *weights == "raw" ? decode::WeightsChoice::kRaw
                                                 : decode::WeightsChoice::kAuto;
          }};
}

}  // namespace

CkptCommand parse_ckpt_command(int argc, const char* const* argv) {
  CkptCommand command;
  CLI::App app{
      "nmt-ckpt: inspects, compares and averages nmt-train checkpoints (safetensors files in\n"
      "<run_dir>/checkpoints/), and imports and exports Hugging Face transformers models.\n"
      "Each command verifies the files it reads (checksum included).",
      "nmt-ckpt"};
  app.set_version_flag("--version", std::string(NMT_VERSION));
  app.require_subcommand(1);
  const std::string errors_doc = std::string(kExitCodesDoc) + "\n";
  app.footer(std::string("Commands:\n") + kInfoDoc + kDiffDoc + kAverageDoc + kLayoutDoc +
             kImportDoc + kExportHfDoc + errors_doc);
  // In this order in the help.
  const std::vector<Subcommand> subcommands = {
      add_info(app, errors_doc),
      add_diff(app, command, errors_doc),
      add_average(app, command, errors_doc),
      add_layout(app, errors_doc),
      add_import_hf(app, command, errors_doc),
      add_export_hf(app, command, errors_doc),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    command.exit_code = usage_exit_code(app, e);
    return command;
  }
  for (const Subcommand& subcommand : subcommands)
    if (subcommand.app->parsed()) subcommand.finish(command);
  return command;
}

}  // namespace nmt::config
