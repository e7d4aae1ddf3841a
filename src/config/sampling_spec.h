#pragma once
// The value of nmt-translate --sampling: "topk:K", "temperature:T" or both, comma-separated
// in either order ("topk:K,temperature:T": the k best tokens, tempered).

#include <string>

#include "decode/sampling_options.h"

namespace nmt::config {

/// Parses a --sampling value into top_k and temperature (seed untouched: it is --seed's).
/// Throws ConfigError naming --sampling and the value for an unknown method, a repeated one,
/// K < 1, or T not a finite number > 0.
decode::SamplingOptions parse_sampling_spec(const std::string& spec);

}  // namespace nmt::config
