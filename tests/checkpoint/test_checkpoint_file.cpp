// Checkpoint files: safetensors round trips, verification of every field, atomic writes.
#include "catch_torch.h"
#include "skip.h"

#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <limits>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/header_json.h"
#include "checkpoint/xxhash64.h"
#include "checkpoint_fixture.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nmt::CheckpointError;
using nmt::checkpoint::CheckpointData;
using nmt::checkpoint::load_checkpoint;
using nmt::checkpoint::save_checkpoint;
using nmt::test::TempDir;

namespace {

/// Same dtype, shape and bytes (so NaN and -0.0 count too).
bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || !a.sizes().equals(b.sizes())) return false;
  const at::Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == cb.nbytes() &&
         (ca.nbytes() == 0 ||
          std::memcmp(ca.const_data_ptr(), cb.const_data_ptr(), ca.nbytes()) == 0);
}

/// One tensor of every supported dtype, plus the shapes that are easy to get wrong.
CheckpointData every_dtype() {
  CheckpointData data;
  data.tensors.emplace_back("f64", at::arange(6, at::kDouble).reshape({2, 3}).div(3));
  at::Tensor f32 = at::arange(8, at::kFloat).sub(3.5);
  f32[0] = std::numeric_limits<float>::quiet_NaN();
  f32[1] = -std::numeric_limits<float>::infinity();
  f32[2] = -0.0f;
  data.tensors.emplace_back("f32", f32);
  data.tensors.emplace_back("f16", at::arange(5, at::kFloat).div(4).to(at::kHalf));
  data.tensors.emplace_back("bf16", at::arange(5, at::kFloat).mul(1.5).to(at::kBFloat16));
  data.tensors.emplace_back(
      "i64", at::tensor(std::vector<int64_t>{INT64_MIN, -1, 0, int64_t{1} << 40, INT64_MAX}));
  data.tensors.emplace_back("i32", at::arange(-3, 3, at::kInt));
  data.tensors.emplace_back("i16", at::arange(-300, 300, 150, at::kShort));
  data.tensors.emplace_back("i8", at::arange(-128, 128, 51, at::kChar));
  data.tensors.emplace_back("u8", at::arange(0, 256, 85, at::kByte));
  data.tensors.emplace_back("bool", at::arange(7, at::kInt).remainder(2).to(at::kBool));
  data.tensors.emplace_back("scalar", at::scalar_tensor(3.25, at::kFloat));  // 0-dim
  data.tensors.emplace_back("empty", at::empty({0, 4}, at::kFloat));         // no elements
  data.tensors.emplace_back("transposed", at::arange(6, at::kFloat).reshape({2, 3}).t());
  return data;
}

/// Writes a file from a hand-made header and data section (for malformed files).
std::filesystem::path write_raw(const TempDir& dir, const std::string& name,
                                const std::string& header, const std::string& data) {
  std::string bytes(8, '\0');
  const uint64_t size = header.size();
  std::memcpy(bytes.data(), &size, 8);
  return dir.write(name, bytes + header + data);
}

/// A well-formed nmt header around `tensors_json` with the right checksum of `data`.
std::string nmt_header(const std::string& tensors_json, const std::string& data) {
  nmt::checkpoint::XxHash64 hash;
  hash.update(data);
  return "{\"__metadata__\":{\"nmt.format\":\"nmt-checkpoint-1\",\"nmt.checksum\":\"" +
         nmt::checkpoint::hex64(hash.digest()) + "\"}" + tensors_json + "}";
}

void check_load_fails(const std::filesystem::path& file, const std::string& reason) {
  INFO(file.string());
  CHECK_THROWS_AS(load_checkpoint(file), CheckpointError);
  CHECK_THROWS_WITH(load_checkpoint(file), StartsWith(file.string() + ": ") && Contains(reason));
}

}  // namespace

TEST_CASE("every dtype, a 0-dim and an empty tensor round-trip exactly, in order", "[checkpoint]") {
  TempDir dir;
  const CheckpointData saved = every_dtype();
  const auto file = dir.path() / "all.safetensors";
  save_checkpoint(file, saved);
  const CheckpointData loaded = load_checkpoint(file);
  REQUIRE(loaded.tensors.size() == saved.tensors.size());
  for (size_t i = 0; i < saved.tensors.size(); ++i) {
    INFO(saved.tensors[i].first);
    CHECK(loaded.tensors[i].first == saved.tensors[i].first);
    CHECK(same_bytes(loaded.tensors[i].second, saved.tensors[i].second));
    CHECK(loaded.tensors[i].second.is_contiguous());
    CHECK(loaded.tensors[i].second.is_cpu());
  }
  CHECK(loaded.at("scalar").dim() == 0);
  CHECK(loaded.at("scalar").item<float>() == 3.25f);
  CHECK(loaded.at("empty").sizes().vec() == std::vector<int64_t>{0, 4});
  CHECK(loaded.at("transposed")[0][1].item<float>() == 3.0f);
  CHECK(loaded.metadata.empty());  // nmt.format and nmt.checksum describe the file only
  CHECK(loaded.source == file);
}

TEST_CASE("empty tensors that share an offset with another tensor load", "[checkpoint]") {
  // The F64 tensors are laid out first, so "e" and "z" begin where "x" begins: a reader that
  // orders tensors by begin alone would see an overlap.
  TempDir dir;
  CheckpointData data;
  data.tensors.emplace_back("x", at::ones({2}, at::kFloat));
  data.tensors.emplace_back("e", at::empty({0}, at::kDouble));
  data.tensors.emplace_back("y", at::ones({3}, at::kInt));
  data.tensors.emplace_back("z", at::empty({2, 0}, at::kDouble));
  const auto file = dir.path() / "ties.safetensors";
  save_checkpoint(file, data);
  const CheckpointData loaded = load_checkpoint(file);
  REQUIRE(loaded.tensors.size() == 4);
  for (size_t i = 0; i < 4; ++i)
    CHECK(same_bytes(loaded.tensors[i].second, data.tensors[i].second));
}

TEST_CASE("the file is safetensors: header length, JSON header, aligned data", "[checkpoint]") {
  TempDir dir;
  const auto file = dir.path() / "layout.safetensors";
  save_checkpoint(file, every_dtype());
  const std::string bytes = nmt::test::read_file(file);
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  CHECK(header_size % 8 == 0);
  const auto header = nmt::checkpoint::parse_header_json(bytes.substr(8, header_size));
  REQUIRE(header.size() == every_dtype().tensors.size() + 1);
  std::vector<std::string> names;
  for (const auto& [name, fields] : header.items()) {
    names.push_back(name);
    if (name == "__metadata__") continue;
    REQUIRE(fields.size() == 3);
    auto field = fields.begin();
    CHECK(field.key() == "dtype");
    CHECK((++field).key() == "shape");
    CHECK((++field).key() == "data_offsets");
    // Each tensor starts at a multiple of its element size (zero-copy readers need that).
    const int64_t begin = fields["data_offsets"][0].get<int64_t>();
    const std::string dtype = fields["dtype"].get<std::string>();
    const int64_t width = dtype == "F64" || dtype == "I64"        ? 8
                          : dtype == "F32" || dtype == "I32"      ? 4
                          : dtype.find("16") != std::string::npos ? 2
                                                                  : 1;
    INFO(name << " " << dtype << " at " << begin);
    CHECK(begin % width == 0);
  }
  CHECK(names.at(0) == "__metadata__");
  CHECK(names.at(1) == "f64");  // header keys keep the caller's order
  CHECK(header[names.at(4)]["dtype"] == "BF16");
}

TEST_CASE("the header is exactly these bytes: compact JSON, sorted metadata, space padding",
          "[checkpoint]") {
  // Checkpoints written before must read the same, and a header's bytes are hashed: the
  // writer's separators, key order, escapes and padding are pinned.
  TempDir dir;
  CheckpointData data;
  data.tensors.emplace_back("w", at::zeros({2, 3}, at::kFloat));
  data.tensors.emplace_back("b \"\xC3\xBC\"", at::zeros({2}, at::kLong));
  data.metadata = {{"step", "12"}, {"a", "x \"q\"\n\t\\ /\x01\x7f \xE6\x97\xA5"}};
  const auto file = dir.path() / "pinned.safetensors";
  save_checkpoint(file, data);
  const std::string bytes = nmt::test::read_file(file);
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  std::string header = bytes.substr(8, header_size);
  const size_t at = header.find("\"nmt.checksum\":\"");
  REQUIRE(at != std::string::npos);
  header.replace(at + 16, 16, "<hash>");
  const size_t end = header.find_last_not_of(' ') + 1;
  CHECK(header_size % 8 == 0);
  CHECK(header.size() - end < 8);  // spaces only to align the data section
  header.resize(end);
  CHECK(header ==
        "{\"__metadata__\":{\"a\":\"x \\\"q\\\"\\n\\t\\\\ /\\u0001\x7f \xE6\x97\xA5\","
        "\"nmt.checksum\":\"<hash>\",\"nmt.format\":\"nmt-checkpoint-2\",\"step\":\"12\"},"
        "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[16,40]},"
        "\"b \\\"\xC3\xBC\\\"\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}");
  CHECK(load_checkpoint(file).metadata == data.metadata);
}

TEST_CASE("metadata round-trips, unicode, quotes and control characters included", "[checkpoint]") {
  TempDir dir;
  CheckpointData data = nmt::test::small_checkpoint(1.0f);
  data.metadata = {
      {"step", "1200"},
      {"unicode",
       "Gr\xC3\xBC\xC3\x9F"
       "e \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x91\x8B"},
      {"quotes", R"(say "hi" \ back\slash /)"},
      {"controls", "tab\tnewline\ncr\r\x01\x1f"},
      {"empty", ""},
      {"\xE9\x8D\xB5 key with \"quotes\"", "value"},
      {"config", "model:\n  d_model: 512\n"},
  };
  const auto file = dir.path() / "meta.safetensors";
  save_checkpoint(file, data);
  const CheckpointData loaded = load_checkpoint(file);
  CHECK(loaded.metadata == data.metadata);
  CHECK(loaded.meta("step") == "1200");
  CHECK(nmt::checkpoint::read_checkpoint_metadata(file) == data.metadata);
  CHECK_THROWS_WITH(loaded.meta("epoch"), file.string() + ": no metadata key \"epoch\"");
  CHECK_THROWS_WITH(loaded.at("model.bias"),
                    file.string() + ": no tensor \"model.bias\" (the checkpoint has 2 tensors)");
  CHECK(loaded.find("model.bias") == nullptr);
  REQUIRE(loaded.find("model.weight") != nullptr);
  CHECK(loaded.find("model.weight")->sizes().vec() == std::vector<int64_t>{2, 3});
}

TEST_CASE("what cannot be saved is refused, naming the tensor or key", "[checkpoint]") {
  TempDir dir;
  const auto file = dir.path() / "bad.safetensors";
  const auto refuses = [&](const CheckpointData& data, const std::string& reason) {
    CHECK_THROWS_WITH(save_checkpoint(file, data), StartsWith(file.string()) && Contains(reason));
    CHECK_FALSE(std::filesystem::exists(file));
  };
  CheckpointData complex;
  complex.tensors.emplace_back("model.c", at::zeros({2}, at::kComplexFloat));
  refuses(complex, "tensor \"model.c\": dtype ComplexFloat cannot be stored");
  CheckpointData duplicate = nmt::test::small_checkpoint(1);
  duplicate.tensors.push_back(duplicate.tensors[0]);
  refuses(duplicate, "duplicate tensor name \"model.weight\"");
  CheckpointData reserved = nmt::test::small_checkpoint(1, {{"nmt.checksum", "0"}});
  refuses(reserved, "metadata key nmt.checksum is reserved");
  CheckpointData bad_utf8 = nmt::test::small_checkpoint(1, {{"k", "\xFF"}});
  refuses(bad_utf8, "must be valid UTF-8");
  CheckpointData undefined;
  undefined.tensors.emplace_back("model.x", at::Tensor());
  refuses(undefined, "tensor \"model.x\" is undefined");
  CheckpointData metadata_name;
  metadata_name.tensors.emplace_back("__metadata__", at::zeros({1}));
  refuses(metadata_name, "invalid tensor name");
}

TEST_CASE("a tensor that requires grad, or is a view, is saved as its values", "[checkpoint]") {
  TempDir dir;
  CheckpointData data;
  at::Tensor weight = at::ones({4, 4}).requires_grad_();
  data.tensors.emplace_back("model.weight", weight);
  data.tensors.emplace_back("model.slice",
                            at::arange(16, at::kFloat).reshape({4, 4}).slice(1, 1, 3));
  const auto file = dir.path() / "views.safetensors";
  save_checkpoint(file, data);
  const CheckpointData loaded = load_checkpoint(file);
  CHECK_FALSE(loaded.at("model.weight").requires_grad());
  CHECK(loaded.at("model.weight").equal(weight.detach()));
  CHECK(loaded.at("model.slice").equal(data.tensors[1].second));
}

TEST_CASE("a saved CUDA tensor loads back on the CPU", "[checkpoint][cuda]") {
  if (!at::hasCUDA()) {
    NMT_SKIP_WITHOUT_CUDA("no CUDA device: GPU tensor saving not exercised");
  }
  TempDir dir;
  CheckpointData data;
  const at::Tensor cpu = at::arange(12, at::kFloat).reshape({3, 4});
  data.tensors.emplace_back("model.gpu", cpu.to(at::kCUDA).t());  // non-contiguous on the GPU
  data.tensors.emplace_back("model.gpu_bf16", cpu.to(at::kCUDA, at::kBFloat16));
  const auto file = dir.path() / "gpu.safetensors";
  save_checkpoint(file, data);
  const CheckpointData loaded = load_checkpoint(file);
  CHECK(loaded.at("model.gpu").is_cpu());
  CHECK(loaded.at("model.gpu").equal(cpu.t()));
  CHECK(loaded.at("model.gpu_bf16").equal(cpu.to(at::kBFloat16)));
}

TEST_CASE("damaged files are refused with the reason", "[checkpoint]") {
  TempDir dir;
  const auto good = dir.path() / "good.safetensors";
  save_checkpoint(good, nmt::test::small_checkpoint(2.0f, {{"step", "7"}}));
  const auto size = std::filesystem::file_size(good);
  const auto copy = [&](const std::string& name) {
    const auto file = dir.path() / name;
    std::filesystem::copy_file(good, file);
    return file;
  };

  const auto truncated = copy("truncated.safetensors");
  nmt::test::truncate_file(truncated, size - 10);
  check_load_fails(truncated, fmt::format("truncated: {} bytes, header says {}", size - 10, size));
  const auto in_header = copy("in_header.safetensors");
  nmt::test::truncate_file(in_header, 20);
  check_load_fails(in_header, "truncated: 20 bytes, header says its JSON alone ends at byte");
  const auto short_file = copy("short.safetensors");
  nmt::test::truncate_file(short_file, 5);
  check_load_fails(short_file, "truncated: 5 bytes, shorter than the 8-byte header length");
  check_load_fails(dir.write("empty.safetensors", ""), "empty file (0 bytes), not a checkpoint");
  check_load_fails(
      dir.write("garbage.safetensors", "this is a text file, certainly no checkpoint\n"),
      "not a checkpoint: the first 8 bytes give a header length of");
  check_load_fails(dir.path() / "missing.safetensors", "cannot open: No such file or directory");
  check_load_fails(dir.path(), "not a regular file");

  const auto flipped = copy("flipped.safetensors");
  nmt::test::flip_byte(flipped, static_cast<std::streamoff>(size - 5));  // in the data
  check_load_fails(flipped, "checksum mismatch");
  const auto flipped_header = copy("flipped_header.safetensors");
  nmt::test::flip_byte(flipped_header, 9);  // inside the JSON
  check_load_fails(flipped_header, "not a checkpoint: the header is not valid JSON");
  // A changed metadata value that keeps the JSON valid: the checksum covers the header too.
  const auto flipped_value = copy("flipped_value.safetensors");
  {
    const std::string bytes = nmt::test::read_file(flipped_value);
    const size_t at = bytes.find("\"step\":\"");
    REQUIRE(at != std::string::npos);
    std::fstream f(flipped_value, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at + 8));
    f.put('9');
  }
  check_load_fails(flipped_value, "checksum mismatch: the content hashes to");
  const auto appended = copy("appended.safetensors");
  std::ofstream(appended, std::ios::app | std::ios::binary) << "xyz";
  check_load_fails(appended,
                   fmt::format("{} bytes, but the header accounts for only {}", size + 3, size));
  // The intact original still loads.
  CHECK(load_checkpoint(good).at("model.weight")[1][2].item<float>() == 2.0f);
}

TEST_CASE("headers that lie about their tensors are refused", "[checkpoint]") {
  TempDir dir;
  const std::string data(24, '\x01');
  const auto entry = [](const std::string& name, const std::string& fields) {
    return ",\"" + name + "\":{" + fields + "}";
  };
  check_load_fails(
      write_raw(dir, "plain.safetensors",
                "{\"t\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]}}", data),
      "not an nmt-train checkpoint: a safetensors file without nmt.format in its metadata");
  check_load_fails(
      write_raw(dir, "v3.safetensors", "{\"__metadata__\":{\"nmt.format\":\"nmt-checkpoint-3\"}}",
                ""),
      "unsupported checkpoint format \"nmt-checkpoint-3\" (this build reads nmt-checkpoint-1 and "
      "nmt-checkpoint-2)");
  check_load_fails(
      write_raw(
          dir, "size.safetensors",
          nmt_header(entry("t", "\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,24]"), data),
          data),
      "tensor \"t\": data_offsets [0, 24] hold 24 bytes, but F32 [2, 2] needs 16");
  check_load_fails(
      write_raw(
          dir, "gap.safetensors",
          nmt_header(entry("a", "\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]") +
                         entry("b", "\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[16,24]"),
                     data),
          data),
      "tensor \"b\": data_offsets [16, 24] leave a gap (expected it to begin at 8)");
  check_load_fails(
      write_raw(
          dir, "overlap.safetensors",
          nmt_header(entry("a", "\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]") +
                         entry("b", "\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[8,24]"),
                     data),
          data),
      "overlap another tensor");
  check_load_fails(
      write_raw(
          dir, "dtype.safetensors",
          nmt_header(entry("a", "\"dtype\":\"F8_E4M3\",\"shape\":[24],\"data_offsets\":[0,24]"),
                     data),
          data),
      "tensor \"a\": dtype \"F8_E4M3\" is not supported");
  check_load_fails(
      write_raw(
          dir, "field.safetensors",
          nmt_header(entry("a", "\"dtype\":\"U8\",\"shape\":[24],\"data_offsets\":[0,24],\"x\":1"),
                     data),
          data),
      "tensor \"a\": unexpected field \"x\"");
  check_load_fails(write_raw(dir, "missing.safetensors",
                             nmt_header(entry("a", "\"dtype\":\"U8\",\"shape\":[24]"), data), data),
                   "needs dtype, shape and data_offsets");
  check_load_fails(
      write_raw(
          dir, "negative.safetensors",
          nmt_header(entry("a", "\"dtype\":\"U8\",\"shape\":[-24],\"data_offsets\":[0,24]"), data),
          data),
      "shape: expected an array of integers >= 0");
  check_load_fails(write_raw(dir, "array.safetensors", "[1, 2]", ""),
                   "the header is a JSON array, expected an object");
  // The same hand-made layout with everything right loads: the checks above are not blanket.
  const auto fine = write_raw(
      dir, "fine.safetensors",
      nmt_header(entry("b", "\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[16,24]") +
                     entry("a", "\"dtype\":\"I16\",\"shape\":[2,4],\"data_offsets\":[0,16]"),
                 data),
      data);
  const CheckpointData loaded = load_checkpoint(fine);
  REQUIRE(loaded.tensors.size() == 2);
  CHECK(loaded.tensors[0].first == "b");  // header order, not file order
  CHECK(loaded.at("a")[0][0].item<int16_t>() == 0x0101);
}

TEST_CASE("a failed write leaves the existing checkpoint intact", "[checkpoint]") {
  TempDir dir;
  const auto file = dir.path() / "ckpt.safetensors";
  save_checkpoint(file, nmt::test::small_checkpoint(1.0f, {{"step", "1"}}));
  const std::string original = nmt::test::read_file(file);
  CheckpointData big;
  big.tensors.emplace_back("model.big", at::ones({256, 256}, at::kFloat));  // 256 KiB

  SECTION("the file size limit is hit mid-write (RLIMIT_FSIZE, in a child process)") {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // Without SIG_IGN the kernel kills the process instead of failing write() with EFBIG.
      signal(SIGXFSZ, SIG_IGN);
      const rlimit limit{64 << 10, 64 << 10};
      if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(10);
      try {
        save_checkpoint(file, big);
        _exit(11);  // must not succeed
      } catch (const CheckpointError& e) {
        const std::string message = e.what();
        const bool ok = message.find("cannot write") != std::string::npos &&
                        message.find(std::strerror(EFBIG)) != std::string::npos &&
                        message.rfind(file.string() + ": ", 0) == 0;
        _exit(ok ? 0 : 12);
      } catch (...) {
        _exit(13);
      }
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  SECTION("the folder is not writable (in a child process, without root's privileges)") {
    // Root writes anywhere, and CI runs as root: the child drops to nobody (65534) first.
    namespace fs = std::filesystem;
    fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec |
                                    fs::perms::group_read | fs::perms::group_exec |
                                    fs::perms::others_read | fs::perms::others_exec);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setgid(65534) != 0 ||
                             setuid(65534) != 0 || geteuid() == 0)) {
        _exit(10);
      }
      try {
        save_checkpoint(file, big);
        _exit(11);  // must not succeed
      } catch (const CheckpointError& e) {
        const std::string message = e.what();
        const bool ok = message.rfind(file.string() + ": cannot create", 0) == 0 &&
                        message.find(std::strerror(EACCES)) != std::string::npos;
        _exit(ok ? 0 : 12);
      } catch (...) {
        _exit(13);
      }
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    fs::permissions(dir.path(), fs::perms::owner_all);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);  // 10: could not drop root; 11: saved; 12: wrong message
  }
  SECTION("the target cannot be replaced (it is a folder)") {
    const auto folder = dir.path() / "folder.safetensors";
    std::filesystem::create_directories(folder / "inside");
    CHECK_THROWS_WITH(
        save_checkpoint(folder, big),
        StartsWith(folder.string() + ": cannot rename") && Contains("nothing was replaced"));
    CHECK(std::filesystem::is_directory(folder / "inside"));
  }
  SECTION("the parent is a file") {
    CHECK_THROWS_WITH(save_checkpoint(file / "x.safetensors", big),
                      Contains("cannot create") && Contains("Not a directory"));
  }
  CHECK(nmt::test::read_file(file) == original);
  CHECK(load_checkpoint(file).meta("step") == "1");
  for (const auto& name : nmt::test::file_names(dir.path())) {
    INFO(name);
    CHECK(name.find(".tmp-") == std::string::npos);  // no temp file left behind
  }
}

TEST_CASE("saving over a checkpoint replaces it completely", "[checkpoint]") {
  TempDir dir;
  const auto file = dir.path() / "ckpt.safetensors";
  CheckpointData big;
  big.tensors.emplace_back("model.big", at::ones({300, 300}, at::kFloat));
  save_checkpoint(file, big);
  save_checkpoint(file, nmt::test::small_checkpoint(5.0f));
  const CheckpointData loaded = load_checkpoint(file);
  CHECK(loaded.tensors.size() == 2);
  CHECK(loaded.at("model.weight")[0][0].item<float>() == 5.0f);
  CHECK(nmt::test::file_names(dir.path()) == std::vector<std::string>{"ckpt.safetensors"});
}

TEST_CASE("Python's safetensors reads our files", "[checkpoint][python]") {
  const std::string python = NMT_PYTHON;
  if (python.empty() || !std::filesystem::exists(python)) {
    NMT_SKIP("no venv python (NMT_PYTHON='" << python << "'): the Python interop check");
  }
  if (nmt::test::run_command("'" + python + "' -c 'import safetensors'").exit_code != 0) {
    NMT_SKIP(python << " has no safetensors package: the Python interop check");
  }
  TempDir dir;
  const auto file = dir.path() / "py.safetensors";
  CheckpointData data = every_dtype();
  data.metadata = {{"step", "42"}, {"note", "\xE6\x97\xA5 \"q\""}};
  save_checkpoint(file, data);
  const auto script = dir.write("read.py", R"PY(
import sys
import torch
from safetensors import safe_open
from safetensors.torch import load_file

tensors = load_file(sys.argv[1])
for name, t in tensors.items():
    print(name, str(t.dtype).replace("torch.", ""), list(t.shape), t.flatten().tolist())
with safe_open(sys.argv[1], framework="pt") as f:
    meta = f.metadata()
    print("meta", meta["step"], meta["note"] == "\u65e5 \"q\"", meta["nmt.format"])
)PY");
  const auto r =
      nmt::test::run_command("'" + python + "' " + script.string() + " " + file.string());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("f64 float64 [2, 3] [0.0, 0.3333333333333333, 0.6666666666666666, "
                             "1.0, 1.3333333333333333, 1.6666666666666667]"));
  CHECK_THAT(r.out, Contains("f32 float32 [8] [nan, -inf, -0.0, -0.5, 0.5, 1.5, 2.5, 3.5]"));
  CHECK_THAT(r.out, Contains("f16 float16 [5] [0.0, 0.25, 0.5, 0.75, 1.0]"));
  CHECK_THAT(r.out, Contains("bf16 bfloat16 [5] [0.0, 1.5, 3.0, 4.5, 6.0]"));
  CHECK_THAT(r.out, Contains("i64 int64 [5] [-9223372036854775808, -1, 0, 1099511627776, "
                             "9223372036854775807]"));
  CHECK_THAT(r.out, Contains("i32 int32 [6] [-3, -2, -1, 0, 1, 2]"));
  CHECK_THAT(r.out, Contains("i16 int16 [4] [-300, -150, 0, 150]"));
  CHECK_THAT(r.out, Contains("i8 int8 [6] [-128, -77, -26, 25, 76, 127]"));
  CHECK_THAT(r.out, Contains("u8 uint8 [4] [0, 85, 170, 255]"));
  CHECK_THAT(r.out, Contains("bool bool [7] [False, True, False, True, False, True, False]"));
  CHECK_THAT(r.out, Contains("scalar float32 [] [3.25]"));
  CHECK_THAT(r.out, Contains("empty float32 [0, 4] []"));
  CHECK_THAT(r.out, Contains("transposed float32 [3, 2] [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]"));
  CHECK_THAT(r.out, Contains("meta 42 True nmt-checkpoint-2"));
}
