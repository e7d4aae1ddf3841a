#include "dist/progress_marks.h"

#include <algorithm>
#include <future>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dist/hang_monitor.h"
#include "dist/key_value_store.h"
#include "dist/store_values.h"
#include "util/error.h"
#include "util/log.h"

namespace nmt::dist {
namespace {

std::string progress_key(int rank) { return fmt::format("nmt/progress/{}", rank); }

/// Every rank's mark from the store; values are "<count>|<place>".
std::vector<RankMark> read_marks(KeyValueStore& store, int world_size, int this_rank) {
  std::vector<RankMark> marks(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    const std::optional<std::string> value = store.get_if_set(progress_key(r));
    if (!value) continue;
    const std::string key = progress_key(r);
    check_value_size(this_rank, key, *value, kMaxProgressMarkBytes, "a progress mark");
    const size_t bar = value->find('|');
    NMT_CHECK(bar != std::string::npos, DistError,
              "rank {}: malformed value of '{}' in the rendezvous store: '{}' (expected a "
              "progress mark, '<count>|<place>')",
              this_rank, key, printable_prefix(*value));
    marks[static_cast<size_t>(r)] = {
        parse_store_integer(this_rank, key, value->substr(0, bar), "a progress mark's count"),
        value->substr(bar + 1)};
  }
  return marks;
}

}  // namespace

std::string describe_progress(const std::vector<RankMark>& marks, int this_rank) {
  // The count orders the places every rank marks alike.
  const auto newest = std::max_element(marks.begin(), marks.end(), [](const auto& a, const auto& b) {
    return a.count < b.count;
  });
  std::vector<std::string> behind;
  for (size_t r = 0; r < marks.size(); ++r) {
    if (marks[r].count == newest->count) continue;
    behind.push_back(marks[r].count < 0 ? fmt::format("rank {} has not started", r)
                                        : fmt::format("rank {} is at '{}'", r, marks[r].place));
  }
  if (behind.empty())
    return fmt::format("; every rank got to '{}', so the hang is inside this collective",
                       newest->place);
  return fmt::format("; behind: {}; the others are at '{}' (this is rank {})",
                     fmt::join(behind, ", "), newest->place, this_rank);
}

ProgressMarks::ProgressMarks(std::shared_ptr<KeyValueStore> store, int rank, int world_size,
                             std::optional<std::chrono::milliseconds> watch_after)
    : store_(std::move(store)), rank_(rank), world_size_(world_size) {
  if (!watch_after) return;
  monitor_ = std::make_unique<HangMonitor>(
      *watch_after, [this] { return report(); },
      [rank](const std::string& message) { log::error("dist", "rank {}: {}", rank, message); });
}

ProgressMarks::~ProgressMarks() = default;

void ProgressMarks::mark(const std::string& place) {
  store_->set(progress_key(rank_), fmt::format("{}|{}", count_++, place));
  marked_ = true;
  if (monitor_) monitor_->mark();
}

std::string ProgressMarks::report() const {
  if (!marked_) return "";
  auto result = std::make_shared<std::promise<std::string>>();
  std::future<std::string> answer = result->get_future();
  std::thread([store = store_, world = world_size_, this_rank = rank_, result] {
    try {
      result->set_value(describe_progress(read_marks(*store, world, this_rank), this_rank));
    } catch (const DistError& e) {
      // The store answered, with a value no rank of this job writes (store_values.h).
      result->set_value(fmt::format("; the ranks' progress is unknown: {}", e.what()));
    } catch (const std::exception&) {
      result->set_value("; the ranks' progress is unknown: the store at rank 0 does not answer");
    }
  }).detach();
  if (answer.wait_for(std::chrono::seconds(3)) != std::future_status::ready)
    return "; the ranks' progress is unknown: the store at rank 0 does not answer (rank 0 may "
           "be the one that stalled)";
  return answer.get();
}

}  // namespace nmt::dist
