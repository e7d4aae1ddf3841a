#pragma once
// amp.mode auto across ranks: one decision, rank 0's, that every rank takes. Each rank's own
// hardware (its GPUs' generation, its CPU's flags) could decide otherwise, and ranks that
// decided apart would train in different precisions, store configs of different hashes (an
// error that would blame the user's config), and make different numbers of store gathers
// (the timing's), pairing every later gather with the wrong operation. So rank 0 resolves
// auto from its own hardware, and every rank takes rank 0's choice in the first gather on the
// communicator, which every rank makes whatever its hardware says. When that choice awaits
// timing, every rank times the model (at once, so that ranks sharing a machine share it as
// they will in training), rank 0 decides from its own times alone, and every rank takes that
// decision in a second gather, the same two gathers on every rank.
//
//   amp::AmpChoice choice = agree_amp_choice(comm, mine);   // rank 0's, on every rank
//   if (choice.needs_timing)
//     choice = settle_amp_choice(comm, choice, [&] { return AmpTimes{fp32_s, bf16_s}; });

#include <functional>
#include <string>

#include "amp/amp_choice.h"
#include "amp/amp_options.h"
#include "dist/device.h"

namespace nmt::dist {
class Communicator;
}

namespace nmt::job {

/// What amp.mode auto decides from on this machine: its GPUs' compute capabilities (the
/// lowest), else the CPU's features (devices.cpu, as probe_devices read them).
amp::AmpHardware amp_hardware(const dist::DeviceInfo& devices);

/// The precision of `options` on this machine: a named mode as it is; auto by amp/amp_choice.h's
/// rule for `devices` (a choice that needs timing, a CPU with bf16 instructions, says so).
amp::AmpChoice choose_amp(const amp::AmpOptions& options, const dist::DeviceInfo& devices);

/// The precision of the job, the same on every rank: rank 0 chooses (choose_amp, from rank 0's
/// devices) and every rank takes rank 0's choice, in the first gather on `communicator` (null:
/// this process alone). A decided mode is logged; one that awaits timing is settled by
/// settle_amp_choice once the data is ready.
amp::AmpChoice agree_amp(const amp::AmpOptions& options, const dist::DeviceInfo& devices,
                         dist::Communicator* communicator);

/// A choice as rank 0 hands it over: "<mode>\n<automatic 0|1>\n<needs_timing 0|1>\n<reason>".
std::string encode_amp_choice(const amp::AmpChoice& choice);

/// The choice of encode_amp_choice's text; throws DistError naming `rank` (the reader) when
/// the text is malformed.
amp::AmpChoice decode_amp_choice(const std::string& text, int rank);

/// Rank 0's `mine`, on every rank (one all_gather_strings; `mine` of other ranks is unused).
/// Without a communicator (one process), `mine`.
amp::AmpChoice agree_amp_choice(dist::Communicator* comm, const amp::AmpChoice& mine);

/// The mean step times of one rank's timing (train/amp_timing.h), in seconds.
struct AmpTimes {
  double fp32_s = 0;  ///< a step in fp32
  double bf16_s = 0;  ///< the same step in bf16
};

/// Settles `pending` (a choice that needs timing, the same on every rank): every rank calls
/// `time`, then rank 0 decides from its own times (amp::decide_by_timing) and every rank takes
/// rank 0's decision (one all_gather_strings). Without a communicator, this process decides.
amp::AmpChoice settle_amp_choice(dist::Communicator* comm, const amp::AmpChoice& pending,
                                 const std::function<AmpTimes()>& time);

}  // namespace nmt::job
