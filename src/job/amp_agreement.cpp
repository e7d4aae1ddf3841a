#include "job/amp_agreement.h"

#include <algorithm>

#include <fmt/format.h>

#include "dist/process_group.h"
#include "dist/store_values.h"
#include "util/error.h"
#include "util/log.h"

namespace nmt::job {

amp::AmpHardware amp_hardware(const dist::DeviceInfo& devices) {
  amp::AmpHardware hardware;
  hardware.cuda = devices.cuda_devices > 0;
  if (hardware.cuda && !devices.cuda_capabilities.empty())
    hardware.min_cuda_capability =
        *std::min_element(devices.cuda_capabilities.begin(), devices.cuda_capabilities.end());
  if (!hardware.cuda) hardware.cpu = devices.cpu;
  return hardware;
}

amp::AmpChoice choose_amp(const amp::AmpOptions& options, const dist::DeviceInfo& devices) {
  return amp::resolve_amp_mode(options.mode,
                               options.mode ? amp::AmpHardware{} : amp_hardware(devices));
}

amp::AmpChoice agree_amp(const amp::AmpOptions& options, const dist::DeviceInfo& devices,
                         dist::Communicator* communicator) {
  const amp::AmpChoice choice = agree_amp_choice(communicator, choose_amp(options, devices));
  if (!choice.needs_timing)
    log::info("train", "precision: {} ({}{})", amp::mode_name(choice.mode),
              choice.automatic ? "amp.mode auto: " : "", choice.reason);
  return choice;
}

std::string encode_amp_choice(const amp::AmpChoice& choice) {
  return fmt::format("{}\n{}\n{}\n{}", amp::mode_name(choice.mode), choice.automatic ? 1 : 0,
                     choice.needs_timing ? 1 : 0, choice.reason);
}

amp::AmpChoice decode_amp_choice(const std::string& text, int rank) {
  const size_t a = text.find('\n');
  const size_t b = a == std::string::npos ? a : text.find('\n', a + 1);
  const size_t c = b == std::string::npos ? b : text.find('\n', b + 1);
  const auto malformed = [&] {
    NMT_THROW(DistError,
              "rank {}: rank 0's amp.mode decision is malformed: '{}' (expected "
              "'<mode>\\n<0|1>\\n<0|1>\\n<reason>'; do all ranks run the same nmt-train?)",
              rank, dist::printable_prefix(text));
  };
  if (c == std::string::npos) malformed();
  const std::string mode = text.substr(0, a);
  const std::string automatic = text.substr(a + 1, b - a - 1);
  const std::string needs_timing = text.substr(b + 1, c - b - 1);
  amp::AmpChoice choice;
  bool known = false;
  for (const auto& [name, value] : amp::kAmpModeNames) {
    if (name != mode) continue;
    choice.mode = value;
    known = true;
  }
  if (!known || (automatic != "0" && automatic != "1") ||
      (needs_timing != "0" && needs_timing != "1"))
    malformed();
  choice.automatic = automatic == "1";
  choice.needs_timing = needs_timing == "1";
  choice.reason = text.substr(c + 1);
  return choice;
}

namespace {

/// Rank 0's choice among every rank's encoded one.
amp::AmpChoice rank0s(dist::Communicator& comm, const amp::AmpChoice& mine) {
  return decode_amp_choice(comm.all_gather_strings(encode_amp_choice(mine)).at(0), comm.rank());
}

}  // namespace

amp::AmpChoice agree_amp_choice(dist::Communicator* comm, const amp::AmpChoice& mine) {
  return comm ? rank0s(*comm, mine) : mine;
}

amp::AmpChoice settle_amp_choice(dist::Communicator* comm, const amp::AmpChoice& pending,
                                 const std::function<AmpTimes()>& time) {
  NMT_CHECK(pending.needs_timing, Error, "settle_amp_choice: the choice needs no timing");
  const AmpTimes t = time();
  const amp::AmpChoice mine = amp::decide_by_timing(pending, t.fp32_s, t.bf16_s);
  return comm ? rank0s(*comm, mine) : mine;
}

}  // namespace nmt::job
