#pragma once
// TensorBoard event files, written by hand: the TFRecord framing and the three protobuf
// messages a scalar needs (tensorboard/compat/proto event.proto and summary.proto):
//
//   record: uint64 length | uint32 masked_crc32c(length) | payload | uint32 masked_crc32c(payload)
//           (little endian; masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8, CRC-32C Castagnoli)
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
//
// Why not protoc and libprotobuf: three messages of five fields are ~60 lines of varints;
// generated code would add the protobuf headers to a 2-core build and a second protobuf next to
// the copy LibTorch carries. tests/util/test_event_file.cpp pins the bytes to those the PyPI
// tensorboard package's writer produces, and the e2e test reads our files with its reader.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace nmt::event_file {

/// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78) of data.
uint32_t crc32c(std::string_view data);
/// The masked CRC-32C a TFRecord stores (masked so that a CRC of CRCs stays unlikely).
uint32_t masked_crc32c(std::string_view data);
/// One framed record: length, masked CRC of the length bytes, payload, masked CRC of payload.
std::string frame_record(std::string_view payload);

/// One summary value: a scalar under a tag.
struct Scalar {
  std::string tag;  ///< e.g. "train/loss"
  float value = 0;  ///< simple_value (TensorBoard stores scalars as float32)
};

/// An Event message, the subset TensorBoard's scalar dashboard reads.
struct Event {
  double wall_time = 0;         ///< seconds since the Unix epoch
  int64_t step = 0;             ///< the update the values belong to
  std::string file_version;     ///< "brain.Event:2" in a file's first event, else empty
  std::vector<Scalar> scalars;  ///< the summary's values (none: no summary field)
};

/// The protobuf bytes of an event (fields equal to proto3 defaults left out, as protobuf does).
std::string encode_event(const Event& event);
/// Decodes an Event, skipping fields outside the subset. Throws Error on malformed bytes.
Event decode_event(std::string_view payload);

/// What an event file holds, record by record.
struct RecordScan {
  std::vector<std::string> payloads;  ///< the complete, intact records, in order
  uint64_t intact_bytes = 0;          ///< bytes those records span from the file's start
  bool damaged_tail = false;          ///< bytes after them are a cut or corrupt record
};

/// Reads an event file's records up to its end or its first incomplete or corrupt record (a
/// writer killed mid-record leaves one). Throws Error when the file cannot be read.
RecordScan read_records(const std::filesystem::path& file);

}  // namespace nmt::event_file
