#include "data/length_order.h"

#include <algorithm>
#include <utility>

#include "util/hash.h"

namespace nmt::data {

uint64_t hilbert_index(uint32_t x, uint32_t y, int order) {
  uint64_t d = 0;
  for (uint32_t s = 1u << (order - 1); s > 0; s >>= 1) {
    const uint32_t rx = (x & s) ? 1 : 0;
    const uint32_t ry = (y & s) ? 1 : 0;
    d += static_cast<uint64_t>(s) * s * ((3 * rx) ^ ry);
    if (ry == 0) {  // rotate the quadrant so the curve stays continuous
      if (rx == 1) {
        x = s - 1 - x;
        y = s - 1 - y;
      }
      std::swap(x, y);
    }
  }
  return d;
}

std::vector<uint32_t> length_order_of(const std::vector<int32_t>& src,
                                      const std::vector<int32_t>& tgt, uint64_t stream,
                                      LengthSort method) {
  const auto n = static_cast<uint32_t>(src.size());
  int64_t longest = 1;
  for (uint32_t i = 0; i < n; ++i) longest = std::max<int64_t>({longest, src[i], tgt[i]});
  int order_bits = 1;
  while ((int64_t{1} << order_bits) <= longest) ++order_bits;
  // Sort by (Hilbert index, per-epoch hash): pairs of equal lengths are interchangeable for
  // padding, so the hash reshuffles batch contents each epoch at no cost in efficiency.
  const auto hilbert = [&src, &tgt, order_bits](uint32_t i) {
    return hilbert_index(static_cast<uint32_t>(src[i]), static_cast<uint32_t>(tgt[i]), order_bits);
  };
  const auto tie_key = [stream](uint32_t i) {
    return (splitmix64(stream ^ i) & ~uint64_t{0xffffffff}) | i;
  };
  std::vector<uint32_t> order(n);
  const size_t cells = size_t{1} << (2 * order_bits);
  if (method == LengthSort::kKeys ||
      (method == LengthSort::kAuto && (cells > (size_t{1} << 24) || cells > n))) {
    // Few pairs, or sentences past 4,096 tokens: one sort of 16-byte keys.
    std::vector<std::pair<uint64_t, uint64_t>> keys(n);
    for (uint32_t i = 0; i < n; ++i) keys[i] = {hilbert(i), tie_key(i)};
    std::sort(keys.begin(), keys.end());
    for (uint32_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(keys[i].second & 0xffffffff);
    return order;
  }
  // The same order in half the memory (tens of millions of pairs): the Hilbert indices are
  // few (2^(2 x order_bits)), so pairs are counted into a bucket per index, and only each
  // bucket's 8-byte tie keys are sorted.
  std::vector<uint32_t> start(cells + 1, 0);
  for (uint32_t i = 0; i < n; ++i) ++start[hilbert(i) + 1];
  for (size_t c = 0; c < cells; ++c) start[c + 1] += start[c];
  std::vector<uint64_t> keys(n);
  {
    std::vector<uint32_t> next(start.begin(), start.end() - 1);
    for (uint32_t i = 0; i < n; ++i) keys[next[hilbert(i)]++] = tie_key(i);
  }
  for (size_t c = 0; c < cells; ++c)
    if (start[c + 1] - start[c] > 1)
      std::sort(keys.begin() + start[c], keys.begin() + start[c + 1]);
  for (uint32_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(keys[i] & 0xffffffff);
  return order;
}

}  // namespace nmt::data
