// util/event_file: TensorBoard's record framing and Event messages, byte for byte as the PyPI
// tensorboard package (2.21.0) writes them. The fixtures were made with its own writer:
//   from tensorboard.compat.proto import event_pb2, summary_pb2
//   from tensorboard.summary.writer.record_writer import RecordWriter
//   RecordWriter(buf).write(event_pb2.Event(wall_time=..., ...).SerializeToString())
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "test_support.h"
#include "util/error.h"
#include "util/event_file.h"

namespace ef = nmt::event_file;

namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// Event(wall_time=1700000000.5, step=42, summary=[train/loss 2.5, valid/dev/bleu -0.125])
const std::string kScalarRecord = from_hex(
    "3700000000000000e7e8ca590900002040fc54d941102a2a2a0a110a0a747261696e2f6c6f7373150000204"
    "00a150a0e76616c69642f6465762f626c657515000000be1a9e727a");
// Event(wall_time=1700000000.25, file_version="brain.Event:2")
const std::string kVersionRecord =
    from_hex("1800000000000000a37f4b220900001040fc54d9411a0d627261696e2e4576656e743a32338d2fe9");

const ef::Event kScalarEvent{
    1700000000.5, 42, "", {{"train/loss", 2.5f}, {"valid/dev/bleu", -0.125f}}};

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("event_file: CRC-32C has the standard check value", "[event_file]") {
  CHECK(ef::crc32c("123456789") == 0xe3069283u);
  CHECK(ef::crc32c("") == 0u);
}

TEST_CASE("event_file: events are framed byte for byte as tensorboard writes them",
          "[event_file]") {
  CHECK(ef::frame_record(ef::encode_event(kScalarEvent)) == kScalarRecord);
  CHECK(ef::frame_record(ef::encode_event({1700000000.25, 0, "brain.Event:2", {}})) ==
        kVersionRecord);
  // A zero is a scalar all the same (simple_value is a oneof member); step 0 is left out.
  CHECK(ef::encode_event({1.0, 0, "", {{"a", 0.0f}}}) ==
        from_hex("09000000000000f03f2a0a0a080a01611500000000"));
}

TEST_CASE("event_file: an event decodes to what was encoded", "[event_file]") {
  const ef::Event e = ef::decode_event(kScalarRecord.substr(12, kScalarRecord.size() - 16));
  CHECK(e.wall_time == 1700000000.5);
  CHECK(e.step == 42);
  CHECK(e.file_version.empty());
  REQUIRE(e.scalars.size() == 2);
  CHECK(e.scalars[1].tag == "valid/dev/bleu");
  CHECK(e.scalars[1].value == -0.125f);
  const ef::Event big =
      ef::decode_event(ef::encode_event({3.0, int64_t{1} << 40, "", {{"x", 1e-7f}}}));
  CHECK(big.step == int64_t{1} << 40);
  CHECK(big.scalars.at(0).value == 1e-7f);
  CHECK_THROWS_AS(ef::decode_event(from_hex("0900")), nmt::Error);  // a cut double
}

TEST_CASE("event_file: reading stops at a cut or corrupt record", "[event_file]") {
  nmt::test::TempDir dir;
  const auto file = dir.path() / "events";
  write_file(file, kVersionRecord + kScalarRecord);
  auto scan = ef::read_records(file);
  CHECK(scan.payloads.size() == 2);
  CHECK_FALSE(scan.damaged_tail);
  CHECK(scan.intact_bytes == kVersionRecord.size() + kScalarRecord.size());

  write_file(file, kVersionRecord + kScalarRecord.substr(0, 20));  // killed mid-record
  scan = ef::read_records(file);
  CHECK(scan.payloads.size() == 1);
  CHECK(scan.damaged_tail);
  CHECK(scan.intact_bytes == kVersionRecord.size());

  std::string flipped = kVersionRecord + kScalarRecord;
  flipped[kVersionRecord.size() + 30] ^= 1;  // inside the second payload: its CRC fails
  write_file(file, flipped);
  scan = ef::read_records(file);
  CHECK(scan.payloads.size() == 1);
  CHECK(scan.damaged_tail);
  CHECK_THROWS_AS(ef::read_records(dir.path() / "missing"), nmt::Error);
}
