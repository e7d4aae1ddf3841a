#include "data/plan_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/file_lock.h"
#include "util/log.h"

namespace nmt::data {
namespace {

using Span = EpochPlan::Span;

constexpr char kMagic[8] = {'N', 'M', 'T', 'P', 'L', 'A', 'N', '\0'};
constexpr uint32_t kFormatVersion = 1;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t span_bytes;  ///< sizeof(Span) of the writer
  uint64_t key;
  int64_t epoch;
  int64_t ranks;
  uint64_t spans;
  uint64_t pairs;
};
static_assert(sizeof(Header) == 56, "the plan file's header is 56 bytes");
static_assert(sizeof(Span) % 8 == 0, "spans keep the pair ids 8-aligned");

uint64_t file_size_of(uint64_t spans, uint64_t pairs) {
  return sizeof(Header) + spans * sizeof(Span) + pairs * sizeof(uint32_t);
}

/// "plan.<16 hex>.bin", the names plan_through_files owns in its folder.
bool is_plan_file_name(const std::string& name) {
  static const std::regex kName("plan\\.[0-9a-f]{16}\\.bin");
  return std::regex_match(name, kName);
}

/// The spans with their padding zeroed, so that equal plans are equal files.
void write_spans(AtomicFileWriter& out, const FlatArray<Span>& spans) {
  constexpr size_t kChunk = 4096;
  std::vector<Span> chunk(kChunk);
  for (size_t first = 0; first < spans.size(); first += kChunk) {
    const size_t count = std::min(kChunk, spans.size() - first);
    std::memset(static_cast<void*>(chunk.data()), 0, count * sizeof(Span));
    for (size_t i = 0; i < count; ++i) {
      const Span& s = spans[first + i];
      Span& z = chunk[i];
      z.begin = s.begin;
      z.size = s.size;
      z.src_len = s.src_len;
      z.tgt_len = s.tgt_len;
      z.src_tokens = s.src_tokens;
      z.tgt_tokens = s.tgt_tokens;
    }
    out.write(chunk.data(), count * sizeof(Span));
  }
}

/// The file's plan when it reads as one of `key`; nullopt (and why, in `why`) otherwise.
std::shared_ptr<const EpochPlan> try_map(const std::filesystem::path& file, uint64_t key,
                                         std::string* why) {
  try {
    return std::make_shared<const EpochPlan>(map_plan_file(file, key));
  } catch (const DataError& e) {
    *why = e.what();
    return nullptr;
  }
}

}  // namespace

std::string plan_file_name(uint64_t key) { return fmt::format("plan.{:016x}.bin", key); }

void write_plan_file(const std::filesystem::path& file, const EpochPlan& plan, uint64_t key) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kFormatVersion;
  h.span_bytes = sizeof(Span);
  h.key = key;
  h.epoch = plan.epoch;
  h.ranks = plan.ranks;
  h.spans = plan.spans.size();
  h.pairs = plan.pairs.size();
  AtomicFileWriter out(file);
  out.write(&h, sizeof(h));
  write_spans(out, plan.spans);
  out.write(plan.pairs.data(), plan.pairs.size() * sizeof(uint32_t));
  out.commit();
}

EpochPlan map_plan_file(const std::filesystem::path& file, uint64_t key) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  NMT_CHECK(fd >= 0, DataError, "{}: cannot open the batch plan: {}", file.string(),
            std::strerror(errno));
  struct stat st {};
  const int stat_result = ::fstat(fd, &st);
  const auto size = static_cast<uint64_t>(st.st_size);
  if (stat_result != 0 || size < sizeof(Header)) {
    ::close(fd);
    NMT_THROW(DataError, "{}: not a batch plan ({} bytes)", file.string(), size);
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  NMT_CHECK(base != MAP_FAILED, DataError, "{}: mmap failed: {}", file.string(),
            std::strerror(errno));
  const std::shared_ptr<const void> mapping(
      base, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  const auto* h = static_cast<const Header*>(base);
  NMT_CHECK(std::memcmp(h->magic, kMagic, sizeof(kMagic)) == 0 && h->version == kFormatVersion &&
                h->span_bytes == sizeof(Span),
            DataError, "{}: not a batch plan of format version {}", file.string(), kFormatVersion);
  NMT_CHECK(h->key == key, DataError, "{}: the plan of key {:016x}, not {:016x}", file.string(),
            h->key, key);
  NMT_CHECK(h->ranks >= 1 && h->spans % static_cast<uint64_t>(h->ranks) == 0 && h->spans <= size &&
                h->pairs <= size && size == file_size_of(h->spans, h->pairs),
            DataError, "{}: the batch plan is truncated or damaged ({} bytes)", file.string(),
            size);
  const auto* spans =
      reinterpret_cast<const Span*>(static_cast<const char*>(base) + sizeof(Header));
  const auto* pairs = reinterpret_cast<const uint32_t*>(spans + h->spans);
  for (uint64_t i = 0; i < h->spans; ++i)
    NMT_CHECK(spans[i].begin <= h->pairs && spans[i].size <= h->pairs - spans[i].begin, DataError,
              "{}: batch {} of the plan lies outside its {} pair ids", file.string(), i, h->pairs);
  EpochPlan plan;
  plan.epoch = h->epoch;
  plan.ranks = h->ranks;
  plan.spans = FlatArray<Span>(spans, h->spans, mapping);
  plan.pairs = FlatArray<uint32_t>(pairs, h->pairs, mapping);
  return plan;
}

SharedPlan plan_through_files(const std::filesystem::path& dir, uint64_t key,
                              const std::function<EpochPlan()>& make) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  NMT_CHECK(!error, DataError, "{}: cannot create the folder for batch plans: {}", dir.string(),
            error.message());
  const std::filesystem::path file = dir / plan_file_name(key);
  bool said = false;
  const FileLock lock = FileLock::wait_for(dir / "plan.lock", [&] {
    if (!said)
      log::info("data", "another rank is planning these batches ({}); waiting for its plan",
                file.string());
    said = true;
  });
  SharedPlan result;
  std::string why;
  if (std::filesystem::exists(file)) {
    if ((result.plan = try_map(file, key, &why))) return result;
    log::warn("data", "{}; planning it again", why);
  }
  remove_dead_temps(dir,
                    [](std::string_view base) { return is_plan_file_name(std::string(base)); });
  write_plan_file(file, make(), key);
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (is_plan_file_name(name) && entry.path() != file)
      std::filesystem::remove(entry.path(), error);
  }
  result.plan = std::make_shared<const EpochPlan>(map_plan_file(file, key));
  result.made = true;
  return result;
}

}  // namespace nmt::data
