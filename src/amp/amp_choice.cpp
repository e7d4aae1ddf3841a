#include "amp/amp_choice.h"

#include <fmt/format.h>

namespace nmt::amp {
namespace {

AmpChoice automatic(AmpMode mode, std::string reason) {
  return {mode, true, false, std::move(reason)};
}

std::string capability_name(int capability) {
  return fmt::format("{}.{}", capability / 10, capability % 10);
}

const char* bf16_unit(const CpuFeatures& cpu) { return cpu.amx_bf16 ? "AMX-BF16" : "AVX512-BF16"; }

}  // namespace

AmpChoice choose_amp_mode(const AmpHardware& hardware) {
  if (hardware.cuda) {
    const std::string cc = capability_name(hardware.min_cuda_capability);
    if (hardware.min_cuda_capability >= 80)
      return automatic(AmpMode::kBf16, fmt::format("GPU compute capability {} >= 8.0 has bf16 "
                                                   "tensor cores", cc));
    return automatic(AmpMode::kOff, fmt::format("GPU compute capability {} < 8.0: no fast "
                                                "bf16 (fp16 needs loss scaling; ask for it by "
                                                "name)", cc));
  }
  const CpuFeatures& cpu = hardware.cpu;
  if (!cpu.known)
    return automatic(AmpMode::kOff, "CPU features unknown (no /proc/cpuinfo flags)");
  if (!cpu.amx_bf16 && !cpu.avx512_bf16)
    return automatic(AmpMode::kOff, "CPU without AVX512-BF16 or AMX-BF16: bf16 would be "
                                    "emulated, slower than fp32");
  AmpChoice pending = automatic(AmpMode::kOff,
                                fmt::format("CPU with {}: bf16 and fp32 timed on this model's "
                                            "batches",
                                            bf16_unit(cpu)));
  pending.needs_timing = true;
  return pending;
}

AmpChoice resolve_amp_mode(std::optional<AmpMode> configured, const AmpHardware& hardware) {
  if (configured) return {*configured, false, false, "as configured"};
  return choose_amp_mode(hardware);
}

AmpChoice decide_by_timing(const AmpChoice& pending, double fp32_s, double bf16_s) {
  if (!pending.needs_timing) return pending;
  const double speedup = bf16_s > 0 ? fp32_s / bf16_s : 0.0;
  const bool bf16 = speedup >= kCpuBf16MinSpeedup;
  return automatic(bf16 ? AmpMode::kBf16 : AmpMode::kOff,
                   fmt::format("{}: a step took {:.3g} s in bf16, {:.3g} s in fp32 ({:.2f}x, "
                               "{} {:.2f}x): {}",
                               pending.reason, bf16_s, fp32_s, speedup, bf16 ? ">=" : "<",
                               kCpuBf16MinSpeedup, bf16 ? "bf16" : "fp32"));
}

}  // namespace nmt::amp
