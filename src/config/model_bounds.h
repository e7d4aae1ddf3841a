#pragma once
// The bounds the run schema (run_config.cpp's bind) sets on the model section, applied to
// ModelOptions that did not come from YAML: a model read from elsewhere (import-hf's
// config.json) is checked against the same limits a config file is, before anything is built
// from it, and its stored config then loads.

#include <optional>
#include <string>

#include "model/model_options.h"

namespace nmt::config {

/// A value outside its key's bounds.
struct OutOfBounds {
  std::string key;       ///< the schema's key ("model.d_model")
  std::string value;     ///< the value as the schema prints it
  std::string expected;  ///< what the schema accepts ("an integer in [8, 65536]")
};

/// The first key of the model section whose value in `model` the schema refuses; nullopt when
/// all are within bounds.
std::optional<OutOfBounds> model_out_of_bounds(const model::ModelOptions& model);

/// The schema's bounds of data.vocab_size (pieces of a vocabulary), for the same check on a
/// vocabulary's size: nullopt when `size` is within them, else what they are.
std::optional<std::string> vocab_size_out_of_bounds(int64_t size);

}  // namespace nmt::config
