#pragma once
// The order batches are cut from: pairs along a Hilbert curve over (source length, target
// length), so that neighbours have similar lengths on both sides, ties broken by a hash that
// changes every epoch (data/batch_plan.h cuts and balances the batches).

#include <cstdint>
#include <vector>

namespace nmt::data {

/// How length_order_of sorts: kKeys one sort of 16-byte keys, kBuckets a counting sort on the
/// Hilbert index and a sort of 8-byte keys per bucket (half the memory), kAuto kBuckets where
/// the pairs outnumber the Hilbert cells. All give the same order.
enum class LengthSort { kAuto, kKeys, kBuckets };

/// The order batches are cut from: pair indices by (Hilbert index of (src[i], tgt[i]), the
/// top 32 bits of a hash of (stream, i), i). Lengths are with EOS, at least 1.
std::vector<uint32_t> length_order_of(const std::vector<int32_t>& src,
                                      const std::vector<int32_t>& tgt, uint64_t stream,
                                      LengthSort method = LengthSort::kAuto);

/// Hilbert-curve index of (x, y) on a 2^order square.
uint64_t hilbert_index(uint32_t x, uint32_t y, int order);

}  // namespace nmt::data
