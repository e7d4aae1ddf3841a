#pragma once
// How many pairs each epoch draws from each training corpus (data.train): its weight times
// its size, reshaped by data.sampling_temperature as the multilingual papers do (Arivazhagan
// et al. 2019, Conneau et al. 2020), so that a small language pair is not drowned by a large
// one. Torch-free and deterministic: the counts depend only on sizes, weights and T, and
// which pairs fill them is CorpusSet::draw's hash of (seed, epoch, corpus, pair).
//
// With n_i pairs and weight w_i for corpus i:
//   T = 1:  drawn_i = round(w_i n_i)                        (the weights alone; unchanged)
//   T != 1: N = sum_j round(w_j n_j)                        (the epoch keeps its size)
//           p_i = w_i n_i^(1/T) / sum_j w_j n_j^(1/T)        (temperature on the size, then
//                                                             the weight as a multiplier)
//           drawn_i = N p_i, rounded by largest remainder so the counts sum to N exactly
//           (ties to the earlier corpus).
// T = 1 gives p_i = w_i n_i / sum_j w_j n_j, i.e. the same shares; T -> infinity gives shares
// proportional to the weights alone (equal for equal weights). A corpus may draw more pairs
// than it has (whole copies plus a sample), as a weight above 1 does.
//
// The masses are computed as exp(log w_i + log(n_i) / T - max_j(...)): n^(1/T) itself
// overflows a double at T = 0.01 (the least data.sampling_temperature) from about 1,200 pairs,
// and inf / inf would make every share NaN. Scaled by the largest, each mass lies in [0, 1].

#include <cstdint>
#include <vector>

namespace nmt::data {

/// One corpus's size and weight.
struct CorpusSize {
  int64_t pairs = 0;    ///< pairs in its token cache
  double weight = 1.0;  ///< data.train weight (> 0)
};

/// Pairs each corpus contributes to every epoch at `temperature` (> 0), as the header says.
/// Throws DataError for a temperature that is not a positive number, or a corpus whose
/// weight x pairs is more than 2^53 (no count could hold it).
std::vector<int64_t> drawn_per_epoch(const std::vector<CorpusSize>& corpora, double temperature);

}  // namespace nmt::data
