#include "config/train_cli.h"

#include <cstdio>
#include <limits>

#include <CLI/CLI.hpp>

#include "config/cli_exit.h"
#include "config/config_reference.h"
#include "util/json_text.h"

namespace nmt::config {
namespace {

/// The flags kept as given while CLI11 parses, then made into TrainCommand's sources and resume.
struct TrainFlags {
  std::string config_file;
  std::vector<std::string> sets;
  std::string log_level;
  std::string nproc_per_node;
  std::string master_addr;
  std::string master_port;
  std::string init_from;
  std::string resume = "auto";
};

/// The config file, its overrides and what to do with it: print, dry-run, resume, fine-tune.
void add_config_options(CLI::App& app, TrainCommand& command, TrainFlags& flags) {
  app.add_option("-c,--config", flags.config_file, "YAML config file (see configs/)")
      ->required()
      ->type_name("FILE");
  app.add_option("--set", flags.sets,
                 "override one key, e.g. --set data.max_tokens=2048 (repeatable; value in "
                 "YAML syntax)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  app.add_flag("--print-config", command.print_config,
               "print the effective config as YAML (with each key's doc) and exit");
  // Runs while CLI11 parses, before it checks that --config was given: the reference needs no
  // config file.
  app.add_flag_callback(
      "--config-reference",
      [] {
        std::fputs(config_reference_markdown().c_str(), stdout);
        throw CLI::Success();
      },
      "print every config key with its default, expected form and doc as Markdown (the "
      "reference in docs/configuration.md) and exit; needs no --config");
  app.add_flag("--dry-run", command.dry_run,
               "build the vocabulary, token cache and epoch-1 batch plan for every rank "
               "(--nproc-per-node N plans N ranks in this one process), print a table, write "
               "<run_dir>/batch_stats.json, and exit without training");
  app.add_option("--resume", flags.resume,
                 "auto: continue from the newest valid checkpoint in <run_dir>/checkpoints (a "
                 "damaged one is skipped with a warning), none: start fresh, or a checkpoint "
                 "file; the checkpoint's config sits between the YAML and --set. Checkpoints of "
                 "later steps than the start are moved to <run_dir>/checkpoints/superseded-<time>")
      ->type_name("auto|none|PATH")
      ->capture_default_str();
  app.add_option("--init-from", flags.init_from,
                 "fine-tune: start from this checkpoint file or run directory's parameters and "
                 "vocabulary (fresh optimizer, schedule and data position); same as --set "
                 "train.init_from=PATH; ignored once the run has a checkpoint of its own")
      ->type_name("PATH");
  app.add_option("--log-level", flags.log_level, "same as --set log.level=LEVEL")
      ->check(CLI::IsMember(log::level_names()))
      ->type_name("LEVEL");
}

/// Where the workers run and how they meet: this node's share of the job, the rendezvous.
void add_launcher_options(CLI::App& app, TrainCommand& command, TrainFlags& flags) {
  // The launcher flags speak torchrun's language (both spellings), so a torchrun command
  // line works with this binary on a machine without Python.
  app.add_option("--nproc-per-node,--nproc_per_node", flags.nproc_per_node,
                 "workers on this node, one per GPU (CPU workers without GPU); same as --set "
                 "dist.nproc_per_node=N (0: one per GPU, or 1 without GPU)")
      ->type_name("N");
  app.add_option("--nnodes", command.nnodes,
                 "nodes in the job; start one nmt-train per node with the same --master-addr "
                 "and --master-port")
      ->type_name("N")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--node-rank,--node_rank", command.node_rank, "this node's index in [0, nnodes)")
      ->type_name("R")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--master-addr,--master_addr", flags.master_addr,
                 "rendezvous host (node 0): a name or address of node 0 that every node "
                 "reaches; rank 0's store listens there only, never on every interface; same "
                 "as --set dist.master_addr=HOST")
      ->type_name("HOST");
  app.add_option("--master-port,--master_port", flags.master_port,
                 "rendezvous port; same as --set dist.master_port=PORT (0: a free port, one node "
                 "only)")
      ->type_name("PORT");
  app.add_option("--max-restarts,--max_restarts", command.max_restarts,
                 "after a worker fails: stop all workers and relaunch them from the last "
                 "checkpoint, up to N times")
      ->type_name("N")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

/// Benchmark mode and the options that need it.
void add_benchmark_options(CLI::App& app, TrainCommand& command) {
  auto* benchmark =
      app.add_option("--benchmark", command.benchmark_steps,
                     "benchmark mode: after --benchmark-warmup untimed updates, time N updates "
                     "from a fresh start (no checkpoint, no validation), print a summary and "
                     "write <run_dir>/benchmark.json (tokens/s, step time, time split, peak "
                     "memory per rank, model FLOPs and MFU against a matmul peak measured at "
                     "start)")
          ->type_name("N")
          ->check(CLI::PositiveNumber);
  app.add_option("--benchmark-warmup", command.benchmark_warmup,
                 "untimed updates before the timed ones")
      ->type_name("K")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->needs(benchmark);
  app.add_option("--benchmark-phase-steps", command.benchmark_phase_steps,
                 "updates of a second pass that waits for the device at every phase boundary, "
                 "for the step split and step times; the headline tokens/s comes from the "
                 "first pass, which never waits. -1: as many as --benchmark on a GPU, 0 on "
                 "a CPU (CPU work is synchronous: the first pass times its phases exactly)")
      ->type_name("N")
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()))
      ->capture_default_str()
      ->needs(benchmark);
  app.add_flag("--synthetic", command.synthetic,
               "benchmark on one fixed batch of random ids, as many sentences of "
               "--synthetic-length tokens as data.max_tokens allows, instead of the corpus")
      ->needs(benchmark);
  app.add_option("--synthetic-length", command.synthetic_length,
                 "tokens per source and target sentence of --synthetic (0: data.max_len / 2)")
      ->type_name("T")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->needs(benchmark);
  app.add_option("--dump-batches", command.dump_batches,
                 "benchmark: rank 0 also writes its batches and the initial parameters to FILE "
                 "(safetensors), the input of scripts/bench/reference_train.py")
      ->type_name("FILE")
      ->needs(benchmark);
}

/// Turns the parsed flags into the command's resume choice and --set overrides, and checks
/// what CLI11 cannot (the node rank against the node count).
void apply_flags(const TrainFlags& flags, TrainCommand& command) {
  if (flags.resume == "auto") command.resume = {ResumeFrom::Mode::kAuto, {}};
  else if (flags.resume == "none") command.resume = {ResumeFrom::Mode::kNone, {}};
  else command.resume = {ResumeFrom::Mode::kPath, flags.resume};
  command.sources.file = flags.config_file;
  command.sources.overrides = flags.sets;
  if (!flags.log_level.empty()) command.sources.overrides.push_back("log.level=" + flags.log_level);
  // A path or a host name is taken as it is: unquoted, YAML would read "runs/exp #2" as
  // runs/exp and a comment, and "null" as no value.
  if (!flags.init_from.empty())
    command.sources.overrides.push_back("train.init_from=" + json::quote(flags.init_from));
  if (!flags.nproc_per_node.empty())
    command.sources.overrides.push_back("dist.nproc_per_node=" + flags.nproc_per_node);
  if (!flags.master_addr.empty())
    command.sources.overrides.push_back("dist.master_addr=" + json::quote(flags.master_addr));
  if (!flags.master_port.empty())
    command.sources.overrides.push_back("dist.master_port=" + flags.master_port);
  if (command.node_rank >= command.nnodes) {
    std::fprintf(stderr, "nmt-train: error: --node-rank %d is not below --nnodes %d\n",
                 command.node_rank, command.nnodes);
    command.exit_code = kUsageExitCode;
  }
}

}  // namespace

TrainCommand parse_train_command(int argc, const char* const* argv) {
  TrainCommand command;
  CLI::App app{
      "nmt-train: trains a Transformer translation model with one worker process per GPU\n"
      "(CPU workers without one), token-bucketed batches and mixed precision.\n\n"
      "Configuration precedence: built-in defaults < --config YAML < checkpoint (on resume)\n"
      "< --set and the flags below that name a key. --print-config shows every key with its\n"
      "doc and effective value.\n\n"
      "Errors are reported as one line, with exit code 1 (2 for a wrong command line); a\n"
      "worker's failure ends the run with that worker's exit code.",
      "nmt-train"};
  app.set_version_flag("--version", std::string(NMT_VERSION));
  TrainFlags flags;
  add_config_options(app, command, flags);
  add_launcher_options(app, command, flags);
  add_benchmark_options(app, command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    command.exit_code = usage_exit_code(app, e);
    return command;
  }
  apply_flags(flags, command);
  return command;
}

}  // namespace nmt::config
