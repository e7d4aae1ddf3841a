#include "data/id_map.h"

#include <sentencepiece_processor.h>

namespace nmt::data {

SentencePieceIdMap::SentencePieceIdMap(
    std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor)
    : processor_(std::move(processor)) {}

std::vector<int32_t> SentencePieceIdMap::encode(std::string_view text) const {
  std::vector<int> ids;
  processor_->Encode(text, &ids);
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceIdMap::decode(const std::vector<int32_t>& ids) const {
  const int pad = processor_->pad_id(), bos = processor_->bos_id(), eos = processor_->eos_id();
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (int32_t id : ids)
    if (id != pad && id != bos && id != eos) kept.push_back(id);
  std::string text;
  processor_->Decode(kept, &text);
  return text;
}

int64_t SentencePieceIdMap::size() const { return processor_->GetPieceSize(); }

bool SentencePieceIdMap::is_control(int32_t id) const {
  return id >= 0 && id < processor_->GetPieceSize() && processor_->IsControl(id);
}

std::optional<int32_t> SentencePieceIdMap::piece_id(std::string_view piece) const {
  const int id = processor_->PieceToId(absl::string_view(piece.data(), piece.size()));
  // PieceToId answers the unknown piece's id for a piece it lacks.
  if (id < 0 || (processor_->IsUnknown(id) && processor_->IdToPiece(id) != piece))
    return std::nullopt;
  return id;
}

}  // namespace nmt::data
