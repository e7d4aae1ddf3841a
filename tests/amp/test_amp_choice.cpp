// amp/amp_choice: what amp.mode auto picks per device (mocked hardware), and that a named mode
// is kept as configured.
#include <catch2/catch.hpp>

#include "amp/amp_choice.h"

using nmt::CpuFeatures;
using nmt::amp::AmpHardware;
using nmt::amp::AmpMode;
using nmt::amp::choose_amp_mode;
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
    const auto choice = choose_amp_mode(gpu(cc), 512);
    CHECK(choice.mode == AmpMode::kBf16);
    CHECK(choice.automatic);
  }
  for (const int cc : {60, 70, 75}) {
    INFO(cc);
    const auto choice = choose_amp_mode(gpu(cc), 512);
    CHECK(choice.mode == AmpMode::kOff);
    CHECK_THAT(choice.reason, Contains("< 8.0"));
  }
  CHECK_THAT(choose_amp_mode(gpu(75), 512).reason, Contains("7.5"));
  // The GPU decides, whatever the host CPU has.
  AmpHardware both = gpu(75);
  both.cpu = cpu(true, true).cpu;
  CHECK(choose_amp_mode(both, 512).mode == AmpMode::kOff);
}

TEST_CASE("amp auto on a CPU: bf16 with AVX512-BF16 or AMX from the narrowest width measured", "[amp]") {
  for (const int64_t d : {32, 64, 127, 128, 192, 512, 1024}) {
    INFO(d);
    const AmpMode wide = d >= nmt::amp::kCpuBf16MinWidth ? AmpMode::kBf16 : AmpMode::kOff;
    CHECK(choose_amp_mode(cpu(true, true), d).mode == wide);
    CHECK(choose_amp_mode(cpu(true, false), d).mode == wide);
    CHECK(choose_amp_mode(cpu(false, true), d).mode == wide);
    CHECK(choose_amp_mode(cpu(false, false), d).mode == AmpMode::kOff);
  }
  CHECK(nmt::amp::kCpuBf16MinWidth == 128);  // tiny's width, the narrowest measured faster
  CHECK_THAT(choose_amp_mode(cpu(true, false), 64).reason, Contains("d_model 64 < 128"));
  CHECK_THAT(choose_amp_mode(cpu(false, false), 512).reason, Contains("without AVX512-BF16"));
  CHECK_THAT(choose_amp_mode(cpu(true, true), 128).reason, Contains("AMX-BF16"));
  CHECK_THAT(choose_amp_mode(cpu(true, false), 192).reason, Contains("AVX512-BF16"));
  // Flags that could not be read: fp32, saying so.
  AmpHardware unknown;
  const auto choice = choose_amp_mode(unknown, 512);
  CHECK(choice.mode == AmpMode::kOff);
  CHECK_THAT(choice.reason, Contains("unknown"));
}

TEST_CASE("a named amp mode is kept, whatever the hardware", "[amp]") {
  for (const AmpMode mode : {AmpMode::kOff, AmpMode::kFp16, AmpMode::kBf16}) {
    const auto choice = nmt::amp::resolve_amp_mode(mode, gpu(90), 512);
    CHECK(choice.mode == mode);
    CHECK_FALSE(choice.automatic);
    CHECK(choice.reason == "as configured");
  }
  CHECK(nmt::amp::resolve_amp_mode(std::nullopt, gpu(90), 512).mode == AmpMode::kBf16);
  CHECK(nmt::amp::resolve_amp_mode(std::nullopt, gpu(90), 512).automatic);
}
