#pragma once
// What the hardware can do at most, the denominator of MFU: a GPU's datasheet peak (dense
// matrix math, no sparsity) for the precision the AMP mode multiplies in, or a CPU's
// cores x SIMD lanes x FMA units x 2 x clock where the maximum clock is known. Nothing here is
// measured: the measured matrix-multiply ceiling (benchmark.h) is reported beside it, named.
// Where the peak cannot be known honestly (an unlisted GPU, a CPU whose maximum clock this
// machine does not expose, e.g. in a VM), it is 0 and the source says why.

#include <cstdint>
#include <string>

#include <c10/core/Device.h>

#include "amp/amp_options.h"

namespace nmt::train {

/// A peak and where it comes from.
struct HardwarePeak {
  double tflops = 0;    ///< TFLOP/s; 0: unknown
  std::string source;   ///< the datasheet or formula behind it, or why it is unknown
};

/// The datasheet peak of a GPU named `name` (as CUDA reports it, e.g. "NVIDIA H200") for
/// `mode`'s precision: float32 (not TF32, which LibTorch leaves off) when off.
HardwarePeak gpu_peak(const std::string& name, amp::AmpMode mode);

/// A CPU's peak for `threads` threads, each taken as a core, from /proc/cpuinfo's text and
/// the maximum clock in kHz (cpufreq's cpuinfo_max_freq; 0 when unknown).
HardwarePeak cpu_peak(const std::string& cpuinfo, long max_khz, int threads, amp::AmpMode mode);

/// This rank's part of the job's peak when `ranks_on_device` ranks share its device: the
/// device's peak counts once however many ranks use it, so summed over the ranks it is the
/// sum over devices. 0 when the peak is unknown.
double hardware_peak_share(const HardwarePeak& peak, int64_t ranks_on_device);

/// This process's peak on `device` with `threads` intra-op threads (CPU).
HardwarePeak hardware_peak(c10::Device device, amp::AmpMode mode, int threads);

}  // namespace nmt::train
