// amp/amp_choice: what amp.mode auto picks per device (mocked hardware), how timing settles a
// CPU with bf16 instructions, and that a named mode is kept as configured.
#include <catch2/catch.hpp>

#include "amp/amp_choice.h"

using nmt::CpuFeatures;
using nmt::amp::AmpHardware;
using nmt::amp::AmpMode;
using nmt::amp::choose_amp_mode;
using nmt::amp::decide_by_timing;
using Catch::Matchers::Contains;

namespace {

AmpHardware gpu(int capability) {
  AmpHardware h;
  h.cuda = true;
  h.min_cuda_capability = capability;
  return h;
}

AmpHardware cpu(bool avx512_bf16, bool amx_bf16) {
  AmpHardware h;
  h.cpu.known = true;
  h.cpu.avx512f = avx512_bf16 || amx_bf16;
  h.cpu.avx512_bf16 = avx512_bf16;
  h.cpu.amx_bf16 = amx_bf16;
  return h;
}

}  // namespace

TEST_CASE("amp auto on a GPU: bf16 from compute capability 8.0", "[amp]") {
  for (const int cc : {80, 86, 89, 90, 100}) {
    INFO(cc);
    const auto choice = choose_amp_mode(gpu(cc));
    CHECK(choice.mode == AmpMode::kBf16);
    CHECK(choice.automatic);
  }
  for (const int cc : {60, 70, 75}) {
    INFO(cc);
    const auto choice = choose_amp_mode(gpu(cc));
    CHECK(choice.mode == AmpMode::kOff);
    CHECK_THAT(choice.reason, Contains("< 8.0"));
  }
  CHECK_THAT(choose_amp_mode(gpu(75)).reason, Contains("7.5"));
  // The GPU decides, whatever the host CPU has.
  AmpHardware both = gpu(75);
  both.cpu = cpu(true, true).cpu;
  CHECK(choose_amp_mode(both).mode == AmpMode::kOff);
}

TEST_CASE("amp auto on a CPU: timed where AVX512-BF16 or AMX is present, fp32 without", "[amp]") {
  for (const auto& [avx512_bf16, amx_bf16] : {std::pair{true, true}, std::pair{true, false},
                                               std::pair{false, true}}) {
    const auto choice = choose_amp_mode(cpu(avx512_bf16, amx_bf16));
    CHECK(choice.needs_timing);
    CHECK(choice.automatic);
    CHECK(choice.mode == AmpMode::kOff);  // until timed
    CHECK_THAT(choice.reason, Contains(amx_bf16 ? "AMX-BF16" : "AVX512-BF16"));
  }
  const auto plain = choose_amp_mode(cpu(false, false));
  CHECK_FALSE(plain.needs_timing);
  CHECK(plain.mode == AmpMode::kOff);
  CHECK_THAT(plain.reason, Contains("without AVX512-BF16"));
  // Flags that could not be read: fp32, saying so, nothing timed.
  AmpHardware unknown;
  const auto choice = choose_amp_mode(unknown);
  CHECK(choice.mode == AmpMode::kOff);
  CHECK_FALSE(choice.needs_timing);
  CHECK_THAT(choice.reason, Contains("unknown"));
  // A GPU is never timed.
  CHECK_FALSE(choose_amp_mode(gpu(90)).needs_timing);
}

TEST_CASE("amp auto timing: bf16 only when it is kCpuBf16MinSpeedup times faster", "[amp]") {
  const auto pending = choose_amp_mode(cpu(true, true));
  // Measured on the 2-core AMX Xeon (docs/performance.md): tiny bf16 slower, base faster.
  const auto tiny = decide_by_timing(pending, 0.145, 0.234);
  CHECK(tiny.mode == AmpMode::kOff);
  CHECK_FALSE(tiny.needs_timing);
  CHECK(tiny.automatic);
  CHECK_THAT(tiny.reason, Contains("AMX-BF16") && Contains("0.234 s in bf16") &&
                              Contains("0.145 s in fp32") && Contains("fp32"));
  const auto base = decide_by_timing(pending, 2.21, 1.40);
  CHECK(base.mode == AmpMode::kBf16);
  CHECK_THAT(base.reason, Contains("1.58x"));
  // The margin: 4% faster is noise, 6% is not.
  CHECK(decide_by_timing(pending, 1.04, 1.0).mode == AmpMode::kOff);
  CHECK(decide_by_timing(pending, 1.06, 1.0).mode == AmpMode::kBf16);
  CHECK(nmt::amp::kCpuBf16MinSpeedup == 1.05);
  // A step that took no time (nothing measured) never picks bf16.
  CHECK(decide_by_timing(pending, 1.0, 0.0).mode == AmpMode::kOff);
  // A choice that needed no timing stays as it was.
  const auto gpu_choice = choose_amp_mode(gpu(90));
  CHECK(decide_by_timing(gpu_choice, 1.0, 100.0).mode == AmpMode::kBf16);
}

TEST_CASE("a named amp mode is kept, whatever the hardware", "[amp]") {
  for (const AmpMode mode : {AmpMode::kOff, AmpMode::kFp16, AmpMode::kBf16}) {
    const auto choice = nmt::amp::resolve_amp_mode(mode, gpu(90));
    CHECK(choice.mode == mode);
    CHECK_FALSE(choice.automatic);
    CHECK(choice.reason == "as configured");
  }
  CHECK(nmt::amp::resolve_amp_mode(std::nullopt, gpu(90)).mode == AmpMode::kBf16);
  CHECK(nmt::amp::resolve_amp_mode(std::nullopt, gpu(90)).automatic);
}
