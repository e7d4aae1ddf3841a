#include "amp/amp_choice.h"

#include <fmt/format.h>

namespace nmt::amp {
namespace {

AmpChoice automatic(AmpMode mode, std::string reason) {
  return {mode, true, std::move(reason)};
}

std::string capability_name(int capability) {
  return fmt::format("{}.{}", capability / 10, capability % 10);
}

}  // namespace

AmpChoice choose_amp_mode(const AmpHardware& hardware, int64_t d_model) {
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
  const char* unit = cpu.amx_bf16 ? "AMX-BF16" : "AVX512-BF16";
  if ((cpu.amx_bf16 || cpu.avx512_bf16) && d_model >= kCpuBf16MinWidth)
    return automatic(AmpMode::kBf16, fmt::format("CPU with {} and d_model {} >= {}: bf16 measured "
                                                 "faster than fp32 from d_model {} up",
                                                 unit, d_model, kCpuBf16MinWidth,
                                                 kCpuBf16MinWidth));
  if (cpu.amx_bf16 || cpu.avx512_bf16)
    return automatic(AmpMode::kOff, fmt::format("CPU with {}, but d_model {} < {}, narrower than "
                                                "any model measured faster in bf16",
                                                unit, d_model, kCpuBf16MinWidth));
  return automatic(AmpMode::kOff, "CPU without AVX512-BF16 or AMX-BF16: bf16 would be emulated, "
                                  "slower than fp32");
}

AmpChoice resolve_amp_mode(std::optional<AmpMode> configured, const AmpHardware& hardware,
                           int64_t d_model) {
  if (configured) return {*configured, false, "as configured"};
  return choose_amp_mode(hardware, d_model);
}

}  // namespace nmt::amp
