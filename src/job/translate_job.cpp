#include "job/translate_job.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "config/stored_config.h"
#include "decode/corpus_translation.h"
#include "decode/pair_scoring.h"
#include "decode/translator.h"
#include "dist/device.h"
#include "dist/launcher.h"
#include "dist/worker_env.h"
#include "job/corpus_ranks.h"
#include "util/atomic_file.h"
#include "util/cpu_count.h"
#include "util/error.h"
#include "util/file_lock.h"
#include "util/host_name.h"
#include "util/json_text.h"
#include "util/log.h"

namespace nmt::job {
namespace {

namespace fs = std::filesystem;

/// One process, as a filter: what nmt-translate has always done.
int translate_one_process(const config::TranslateCommand& command) {
  decode::Translator translator(command.options, config::stored_model_options);
  const decode::TranslateStats stats =
      command.score_targets.empty()
          ? translator.translate_file(command.input, command.output)
          : decode::score_file(translator, command.input, command.score_targets, command.output);
  if (!command.stats_json.empty()) {
    const double seconds = stats.seconds;
    nlohmann::ordered_json o;
    o["sentences"] = stats.sentences;
    o["source_tokens"] = stats.source_tokens;
    o["output_tokens"] = stats.output_tokens;
    o["seconds"] = seconds;
    o["sentences_per_s"] = seconds > 0 ? double(stats.sentences) / seconds : 0.0;
    o["output_tokens_per_s"] = seconds > 0 ? double(stats.output_tokens) / seconds : 0.0;
    // Apart from `seconds` (reading, search and writing): start-up is not decoding speed.
    double load_seconds = 0;
    for (const decode::ModelSource& model : translator.models()) load_seconds += model.load_seconds;
    o["load_seconds"] = load_seconds;
    write_file_atomically(command.stats_json, json::pretty(o));
  }
  return 0;
}

/// A corpus is read by every rank and built beside its output: both must be files.
void check_corpus_files(const config::TranslateCommand& command) {
  NMT_CHECK(command.input != "-" && !command.input.empty(), ConfigError,
            "--nproc-per-node: the input must be a file that every rank can read (-i FILE), "
            "not stdin");
  NMT_CHECK(command.output != "-" && !command.output.empty(), ConfigError,
            "--nproc-per-node: the output must be a file (-o FILE), not stdout: it is built in "
            "FILE.parts/ and resumed from there");
  NMT_CHECK(fs::is_regular_file(command.input), ConfigError, "{}: no such input file",
            command.input);
  NMT_CHECK(command.score_targets.empty() || fs::is_regular_file(command.score_targets),
            ConfigError, "--score {}: no such file", command.score_targets);
}

/// The job's lock on OUT.parts: a second job on the same output is refused while one lives.
FileLock lock_output(const std::string& output) {
  const fs::path folder = decode::parts_folder(output);
  fs::create_directories(folder);
  FileLock lock = FileLock::try_lock(folder / ".lock");
  NMT_CHECK(lock.state() != FileLock::State::kBusy, ConfigError,
            "{}: another nmt-translate is decoding into it (lock {}): wait for it to end, or "
            "write to another output",
            output, (folder / ".lock").string());
  if (lock.state() == FileLock::State::kUnsupported)
    log::warn("translate",
              "{}: the file system does not lock files: a second run on this "
              "output would not be refused",
              folder.string());
  return lock;
}

/// The built-in launcher: holds the output's lock while this node's workers decode.
int launch_corpus(const config::TranslateCommand& command, int argc, char** argv) {
  const FileLock lock = lock_output(command.output);
  dist::LaunchOptions options;
  options.nproc_per_node = *command.nproc_per_node;
  if (lock.held()) options.inherited_fds.push_back(lock.fd());
  options.argv.push_back(fs::read_symlink("/proc/self/exe").string());
  for (int i = 1; i < argc; ++i) options.argv.emplace_back(argv[i]);
  log::info("launch", "{} worker(s) decode {} into {}", options.nproc_per_node, command.input,
            command.output);
  return dist::launch_workers(options);
}

/// The options of one rank: its own GPU, or its share of the CPUs.
decode::TranslateOptions rank_options(const config::TranslateCommand& command,
                                      const dist::WorkerEnv& worker) {
  decode::TranslateOptions options = command.options;
  const dist::DeviceInfo devices = dist::probe_devices();
  const bool on_cuda = devices.cuda_devices > 0 && options.device != decode::DeviceChoice::kCpu;
  if (on_cuda) options.cuda_index = worker.local_rank % devices.cuda_devices;
  const int local_ranks = std::max(1, worker.local_world_size);
  if (!on_cuda && options.threads == 0 && local_ranks > 1)
    options.threads = std::max(1, usable_cpus() / local_ranks);
  return options;
}

/// One rank of a corpus job (rank 0 of 1 with --nproc-per-node 1).
int run_corpus_rank(const config::TranslateCommand& command, const dist::WorkerEnv& worker) {
  // The launcher that started us holds the lock; else rank 0 takes it for the job, and a
  // job of several ranks agrees through its rendezvous (job/corpus_ranks.h).
  std::optional<FileLock> lock;
  const auto take_lock = [&] { lock.emplace(lock_output(command.output)); };
  std::optional<CorpusRanks> ranks;
  if (worker.world_size > 1)
    ranks.emplace(worker, take_lock);
  else if (!worker.launched_by_us)
    take_lock();
  const decode::TranslateOptions options = rank_options(command, worker);
  decode::Translator translator(options, config::stored_model_options);
  decode::CorpusOptions corpus;
  corpus.input = command.input;
  corpus.output = command.output;
  corpus.targets = command.score_targets;
  corpus.shard_lines = command.shard_lines;
  corpus.rank = worker.rank;
  corpus.world_size = worker.world_size;
  corpus.force = command.force;
  corpus.run = ranks ? ranks->run()
                     : fmt::format("{} pid {} at {}", host_name().value_or("host"), ::getpid(),
                                   std::chrono::system_clock::now().time_since_epoch().count());
  if (ranks) corpus.sync = ranks->sync();
  corpus.stats_json = command.stats_json;
  decode::translate_corpus(translator, options, corpus);
  return 0;
}

}  // namespace

int run_translate_command(const config::TranslateCommand& command, int argc, char** argv) {
  const dist::WorkerEnv worker = dist::detect_worker_env();
  log::LogOptions log_options;
  log::parse_level(command.log_level, &log_options.level);
  log::init(log_options, worker.rank, worker.world_size, !worker.launched_by_us);
  const bool corpus = command.nproc_per_node.has_value() || worker.world_size > 1;
  if (!corpus) return translate_one_process(command);
  check_corpus_files(command);
  if (worker.launcher == dist::Launcher::kNone && *command.nproc_per_node > 1)
    return launch_corpus(command, argc, argv);
  return run_corpus_rank(command, worker);
}

}  // namespace nmt::job
