#include "train/hardware_peak.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

#include "dist/device.h"

namespace nmt::train {
namespace {

/// Dense datasheet peaks (TFLOP/s) of one GPU: float32 (CUDA cores), bf16 and fp16 (tensor
/// cores, dense); 0 where the GPU has no such math. Longer, more specific names first.
struct GpuSpec {
  const char* match;  ///< substring of the CUDA device name
  const char* name;   ///< the datasheet's product
  double fp32, bf16, fp16;
};
constexpr GpuSpec kGpus[] = {
    {"H200 NVL", "NVIDIA H200 NVL", 60, 835, 835},
    {"H200", "NVIDIA H200 SXM", 67, 989, 989},
    {"H100 NVL", "NVIDIA H100 NVL", 60, 835, 835},
    {"H100 PCIe", "NVIDIA H100 PCIe", 51, 756, 756},
    {"H100", "NVIDIA H100 SXM", 67, 989, 989},
    {"A100", "NVIDIA A100", 19.5, 312, 312},
    {"L40S", "NVIDIA L40S", 91.6, 362, 362},
    {"L40", "NVIDIA L40", 90.5, 181, 181},
    {"A10", "NVIDIA A10", 31.2, 125, 125},
    {"L4", "NVIDIA L4", 30.3, 121, 121},
    {"V100", "NVIDIA V100", 15.7, 0, 125},
};

/// The value of the first "key : value" line of /proc/cpuinfo.
std::string cpuinfo_field(const std::string& cpuinfo, const std::string& key) {
  std::istringstream lines(cpuinfo);
  for (std::string line; std::getline(lines, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
    if (name == key) return colon + 2 <= line.size() ? line.substr(colon + 2) : "";
  }
  return "";
}

bool has_flag(const std::string& flags, const std::string& flag) {
  return (" " + flags + " ").find(" " + flag + " ") != std::string::npos;
}

}  // namespace

HardwarePeak gpu_peak(const std::string& name, amp::AmpMode mode) {
  for (const GpuSpec& spec : kGpus) {
    if (name.find(spec.match) == std::string::npos) continue;
    const double tflops = mode == amp::AmpMode::kBf16   ? spec.bf16
                          : mode == amp::AmpMode::kFp16 ? spec.fp16
                                                        : spec.fp32;
    const char* math = mode == amp::AmpMode::kOff ? "FP32" : mode == amp::AmpMode::kBf16
                                                                 ? "BF16 Tensor Core, dense"
                                                                 : "FP16 Tensor Core, dense";
    if (tflops <= 0) return {0, fmt::format("unknown: the {} has no {} math", spec.name, math)};
    return {tflops, fmt::format("datasheet: {} {} {} TFLOP/s", spec.name, math, tflops)};
  }
  return {0, fmt::format("unknown: no datasheet figure for '{}' in train/hardware_peak.cpp", name)};
}

HardwarePeak cpu_peak(const std::string& cpuinfo, long max_khz, int threads, amp::AmpMode mode) {
  const std::string flags = cpuinfo_field(cpuinfo, "flags");
  const std::string vendor = cpuinfo_field(cpuinfo, "vendor_id");
  if (max_khz <= 0)
    return {0, "unknown: the CPU's maximum clock is not exposed here (no cpufreq), and the "
               "current one in /proc/cpuinfo understates a boosting CPU"};
  // Float32 FLOPs per cycle per core: SIMD lanes x FMA units x 2. AMD's Zen cores have two
  // 256-bit FMA pipes (AVX-512 runs on them in two halves); Intel's AVX-512 server cores two
  // 512-bit units (some SKUs have one: then this overstates the peak, and MFU understates).
  double per_cycle = 0;
  std::string how;
  if (has_flag(flags, "avx512f") && vendor != "AuthenticAMD") {
    per_cycle = 16 * 2 * 2;
    how = "16 lanes x 2 FMA units x 2 (AVX-512)";
  } else if (has_flag(flags, "avx2") && has_flag(flags, "fma")) {
    per_cycle = 8 * 2 * 2;
    how = "8 lanes x 2 FMA units x 2 (AVX2, or AVX-512 on two 256-bit pipes)";
  } else {
    return {0, "unknown: neither AVX2 with FMA nor AVX-512"};
  }
  double factor = 1;
  if (mode == amp::AmpMode::kBf16 && has_flag(flags, "avx512_bf16")) {
    factor = 2;  // VDPBF16PS: two bf16 products per float32 lane
    how += ", x 2 for AVX512-BF16";
  } else if (mode == amp::AmpMode::kFp16 && has_flag(flags, "avx512_fp16")) {
    factor = 2;
    how += ", x 2 for AVX512-FP16";
  } else if (mode != amp::AmpMode::kOff) {
    how += ", no faster math for the AMP type: the float32 rate";
  }
  const double ghz = double(max_khz) / 1e6;
  const double tflops = double(threads) * per_cycle * factor * ghz / 1e3;
  return {tflops, fmt::format("{} thread(s) taken as cores x {} x {:.2f} GHz (cpufreq max)",
                              threads, how, ghz)};
}

double hardware_peak_share(const HardwarePeak& peak, int64_t ranks_on_device) {
  return peak.tflops > 0 ? peak.tflops / double(std::max<int64_t>(1, ranks_on_device)) : 0.0;
}

HardwarePeak hardware_peak(c10::Device device, amp::AmpMode mode, int threads) {
  if (device.is_cuda()) {
    const dist::DeviceInfo info = dist::probe_devices();
    const size_t index = static_cast<size_t>(device.index());
    if (index >= info.device_names.size()) return {0, "unknown: the GPU was not found"};
    return gpu_peak(info.device_names[index], mode);
  }
  std::ifstream in("/proc/cpuinfo");
  const std::string cpuinfo((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  long max_khz = 0;
  std::ifstream("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") >> max_khz;
  return cpu_peak(cpuinfo, max_khz, threads, mode);
}

}  // namespace nmt::train
