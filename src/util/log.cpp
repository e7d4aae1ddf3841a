#include "util/log.h"

#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace nmt::log {
namespace {

constexpr std::array<std::string_view, 6> kLevelNames = {"trace", "debug", "info",
                                                         "warn",  "error", "off"};

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::kTrace: return spdlog::level::trace;
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
    case Level::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

/// The process-wide logger and what it was configured with.
struct State {
  std::mutex mutex;
  std::shared_ptr<spdlog::logger> logger;
  LogOptions options;
  int rank = 0;
  int world_size = 1;
  bool rank_tag = true;
};

State& state() {
  static State s;
  return s;
}

std::string pattern(int rank, int world_size, bool tag) {
  // Ranks are named only when there are several, so one-process output stays short.
  std::string rank_tag = tag && world_size > 1 ? fmt::format("[rank {}] ", rank) : "";
  return "%Y-%m-%d %H:%M:%S %^%-5l%$ " + rank_tag + "%v";
}

}  // namespace

std::vector<std::string> level_names() {
  return std::vector<std::string>(kLevelNames.begin(), kLevelNames.end());
}

bool parse_level(std::string_view name, Level* level) {
  for (size_t i = 0; i < kLevelNames.size(); ++i) {
    if (name == kLevelNames[i]) {
      *level = static_cast<Level>(i);
      return true;
    }
  }
  return false;
}

std::string_view level_name(Level level) { return kLevelNames.at(static_cast<size_t>(level)); }

void init(const LogOptions& options, int rank, int world_size, bool rank_tag) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.options = options;
  s.rank = rank;
  s.world_size = world_size;
  s.rank_tag = rank_tag;
  // Console on stderr: stdout stays clean for what a command prints as its result
  // (--print-config YAML, translations, JSON).
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  Level console_level = options.level;
  if (rank != 0 && console_level < Level::kWarn) console_level = Level::kWarn;
  console->set_level(to_spdlog(console_level));
  console->set_pattern(pattern(rank, world_size, rank_tag));
  s.logger = std::make_shared<spdlog::logger>("nmt", console);
  s.logger->set_level(to_spdlog(options.level));
  // Every line reaches the file at once: a crash must not eat the last lines (they are few:
  // one per log step).
  s.logger->flush_on(spdlog::level::trace);
}

void add_file_sink(const std::filesystem::path& file) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.logger) return;
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file.string(), false);
  sink->set_level(to_spdlog(s.options.level));
  // Files always name the rank: they are read apart from the launcher's output.
  sink->set_pattern(pattern(s.rank, s.world_size, true));
  s.logger->sinks().push_back(std::move(sink));
}

void shutdown() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.logger) s.logger->flush();
  s.logger.reset();
}

int rank() { return state().rank; }
int world_size() { return state().world_size; }

bool enabled(Level level) {
  State& s = state();
  // Before init() everything from info up goes to a default console logger.
  Level threshold = s.logger ? s.options.level : Level::kInfo;
  return level >= threshold && level != Level::kOff;
}

void write(Level level, std::string_view component, std::string_view message) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.logger) {
    LogOptions defaults;
    s.logger = std::make_shared<spdlog::logger>(
        "nmt", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    s.logger->set_pattern(pattern(0, 1, false));
    s.logger->set_level(to_spdlog(defaults.level));
  }
  s.logger->log(to_spdlog(level), "[{}] {}", component, message);
}

}  // namespace nmt::log
