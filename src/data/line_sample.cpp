#include "data/line_sample.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>

#include "data/corpus_reader.h"
#include "util/hash.h"
#include "util/phase_progress.h"
#include "util/timer.h"

namespace nmt::data {
namespace {

/// A line of the sample and its place: the key orders lines, file and line break ties.
struct Drawn {
  uint64_t key = 0;
  uint32_t file = 0;
  int64_t line = 0;
  std::string text;
  bool operator<(const Drawn& o) const {
    return std::tie(key, file, line) < std::tie(o.key, o.file, o.line);
  }
};

/// The key of a line: a hash of (seed, file, line), alike on every platform.
uint64_t line_key(uint64_t seed, uint32_t file, int64_t line) {
  return splitmix64(splitmix64(splitmix64(seed) ^ file) ^ static_cast<uint64_t>(line));
}

bool is_blank(const std::string& text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f'; });
}

/// The `capacity` smallest lines offered, shared by the reading threads. A line enters
/// (k ln(N/k) times for N lines in all) under the lock; the others are turned away by a
/// threshold read without it.
class BottomLines {
 public:
  // The heap grows as lines enter, never reserved: data.spm_sample_lines bounds the sample,
  // and a bound far above the corpus (10^9: 56 GB) must not be set aside before reading.
  explicit BottomLines(size_t capacity) : capacity_(capacity) {}

  /// Whether a line with this key may still enter: false once `key` is above the largest key
  /// of a full sample (the threshold only falls, so a stale read only lets more through).
  bool may_enter(uint64_t key) const { return key <= threshold_.load(std::memory_order_relaxed); }

  void offer(uint64_t key, uint32_t file, int64_t line, const std::string& text) {
    if (capacity_ == 0) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    Drawn drawn{key, file, line, {}};
    if (heap_.size() == capacity_) {
      if (!(drawn < heap_.front())) return;
      std::pop_heap(heap_.begin(), heap_.end());
      heap_.pop_back();
    }
    drawn.text = text;
    heap_.push_back(std::move(drawn));
    std::push_heap(heap_.begin(), heap_.end());
    if (heap_.size() == capacity_) threshold_.store(heap_.front().key, std::memory_order_relaxed);
  }

  /// The sample in file order, then line order.
  std::vector<std::string> take() {
    std::sort(heap_.begin(), heap_.end(), [](const Drawn& a, const Drawn& b) {
      return std::tie(a.file, a.line) < std::tie(b.file, b.line);
    });
    std::vector<std::string> lines;
    lines.reserve(heap_.size());
    for (Drawn& d : heap_) lines.push_back(std::move(d.text));
    heap_.clear();
    return lines;
  }

 private:
  size_t capacity_;
  std::mutex mutex_;
  std::vector<Drawn> heap_;  ///< a max-heap: the largest key of the sample first
  std::atomic<uint64_t> threshold_{std::numeric_limits<uint64_t>::max()};
};

/// The reading threads' shared state: which file is next, the counts for the progress lines,
/// and the first error.
struct Pass {
  const std::vector<std::filesystem::path>& files;
  uint64_t seed;
  BottomLines sample;
  std::vector<double> weights;  ///< each file's share of the bytes, for the progress estimate
  std::unique_ptr<std::atomic<double>[]> fraction_read;  ///< per file, in [0, 1]
  std::atomic<size_t> next_file{0};
  std::atomic<int64_t> lines_read{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;  ///< guards error, workers_left
  std::condition_variable finished;
  std::exception_ptr error;
  int workers_left = 0;

  /// The estimated share of all the files read.
  double fraction() const {
    double f = 0;
    for (size_t i = 0; i < files.size(); ++i) f += weights[i] * fraction_read[i].load();
    return f;
  }
};

/// Counts between two updates of the shared line count.
constexpr int64_t kCountEvery = 1 << 14;

void read_file(Pass& pass, uint32_t file) {
  LineReader reader(pass.files[file]);
  std::string line;
  int64_t counted = 0;
  while (!pass.failed.load(std::memory_order_relaxed) && reader.next(&line)) {
    if (is_blank(line)) continue;
    const uint64_t key = line_key(pass.seed, file, reader.line_number());
    if (pass.sample.may_enter(key)) pass.sample.offer(key, file, reader.line_number(), line);
    if (++counted == kCountEvery) {
      pass.lines_read += counted;
      counted = 0;
      pass.fraction_read[file] = reader.fraction_read();
    }
  }
  pass.lines_read += counted;
  pass.fraction_read[file] = 1.0;
}

void work(Pass& pass) {
  try {
    for (size_t file; (file = pass.next_file++) < pass.files.size() && !pass.failed;)
      read_file(pass, static_cast<uint32_t>(file));
  } catch (...) {
    pass.failed = true;
    const std::lock_guard<std::mutex> lock(pass.mutex);
    if (!pass.error) pass.error = std::current_exception();
  }
  const std::lock_guard<std::mutex> lock(pass.mutex);
  --pass.workers_left;
  pass.finished.notify_all();
}

}  // namespace

LineSample sample_lines(const std::vector<std::filesystem::path>& files,
                        const LineSampleOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  Pass pass{files, options.seed,
            BottomLines(static_cast<size_t>(std::max<int64_t>(0, options.lines)))};
  double total_bytes = 0;
  for (const auto& file : files) {
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(file, ec);
    pass.weights.push_back(ec ? 0.0 : static_cast<double>(bytes));
    total_bytes += pass.weights.back();
  }
  for (double& w : pass.weights) w = total_bytes > 0 ? w / total_bytes : 1.0 / files.size();
  pass.fraction_read = std::make_unique<std::atomic<double>[]>(files.size());
  for (size_t i = 0; i < files.size(); ++i) pass.fraction_read[i] = 0.0;

  const int threads = std::clamp<int>(options.threads, 1, std::max<int>(1, files.size()));
  pass.workers_left = threads;
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) workers.emplace_back(work, std::ref(pass));
  std::unique_ptr<log::PhaseProgress> progress;
  if (!options.progress_name.empty())
    progress = std::make_unique<log::PhaseProgress>("data", options.progress_name, "lines");
  {
    std::unique_lock<std::mutex> lock(pass.mutex);
    while (!pass.finished.wait_for(lock, std::chrono::seconds(1),
                                   [&pass] { return pass.workers_left == 0; })) {
      if (progress) progress->update(double(pass.lines_read.load()), pass.fraction());
    }
  }
  for (std::thread& worker : workers) worker.join();
  if (pass.error) std::rethrow_exception(pass.error);
  LineSample sample;
  sample.lines = pass.sample.take();
  sample.lines_read = pass.lines_read;
  sample.seconds = seconds_since(start);
  if (progress) progress->finish(double(sample.lines_read));
  return sample;
}

}  // namespace nmt::data
