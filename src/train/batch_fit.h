#pragma once
// The search behind data.max_tokens: auto (Marian's mini-batch-fit, done by measurement
// rather than with a model of the allocator): the largest batch of the longest sentences
// whose training step peaks within a memory limit. A step's peak memory grows about linearly
// with the sentence count at a fixed length, so each guess is a secant through the two
// largest batches that fitted, bracketed by the smallest one that did not. No torch here:
// the caller measures.

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace nmt::train {

/// What the search may do.
struct BatchFitOptions {
  int64_t limit_bytes = 0;     ///< peak memory a step may reach (bytes)
  int64_t max_sentences = 1;   ///< never more sentences than this (the token cap / length)
  int64_t first_guess = 16;    ///< sentences of the second probe (the first is 1)
  double precision = 0.02;     ///< stop when the bracket is this close (fraction of the fit)
  int max_probes = 8;          ///< steps measured at most
};

/// One measured step: its sentence count and peak bytes, or no value when it ran out of memory.
struct BatchProbe {
  int64_t sentences = 0;
  std::optional<int64_t> peak_bytes;
};

/// The largest count that fitted, with every probe in the order run.
struct BatchFitResult {
  int64_t sentences = 0;       ///< largest sentence count measured to fit
  int64_t peak_bytes = 0;      ///< its measured peak
  std::vector<BatchProbe> probes;
};

/// Runs one training step of `sentences` sentences; returns its peak memory (bytes), or
/// nothing when the device ran out of memory (the caller must have freed what it held).
using MeasureStep = std::function<std::optional<int64_t>(int64_t sentences)>;

/// Throws nmt::Error when even one sentence does not fit the limit.
BatchFitResult fit_batch(const MeasureStep& measure, const BatchFitOptions& options);

}  // namespace nmt::train
