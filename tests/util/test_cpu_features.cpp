// util/cpu_features: the flags of a /proc/cpuinfo text (mocked here: real ones of three CPUs,
// shortened), and this machine's, which must at least be read.
#include <catch2/catch.hpp>
#include "skip.h"

#include <fstream>
#include <string>

#include "util/cpu_features.h"

using nmt::parse_cpu_features;

namespace {

const std::string kSapphireRapids =
    "processor\t: 0\nvendor_id\t: GenuineIntel\n"
    "model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz\n"
    "flags\t\t: fpu vme avx2 fma avx512f avx512dq avx512_bf16 avx512_fp16 amx_bf16 amx_tile "
    "amx_int8\n\nprocessor\t: 1\nflags\t\t: fpu\n";
const std::string kGenoa =
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B14\n"
    "flags\t\t: fpu avx2 fma avx512f avx512bw avx512_bf16 avx512vnni\n";
const std::string kRome =
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B12\n"
    "flags\t\t: fpu avx avx2 fma\n";

}  // namespace

TEST_CASE("cpu features: AMX, AVX512-BF16 and neither, from /proc/cpuinfo text", "[util]") {
  const auto spr = parse_cpu_features(kSapphireRapids);
  CHECK(spr.known);
  CHECK(spr.avx512f);
  CHECK(spr.avx512_bf16);
  CHECK(spr.amx_bf16);
  CHECK(spr.model_name == "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz");

  const auto genoa = parse_cpu_features(kGenoa);
  CHECK(genoa.avx512_bf16);
  CHECK_FALSE(genoa.amx_bf16);

  const auto rome = parse_cpu_features(kRome);
  CHECK(rome.known);
  CHECK_FALSE(rome.avx512f);
  CHECK_FALSE(rome.avx512_bf16);
  CHECK_FALSE(rome.amx_bf16);
  CHECK(rome.model_name == "AMD EPYC 7B12");
}

TEST_CASE("cpu features: whole words only, and no flags line is unknown", "[util]") {
  // amx_bf16x and avx512_bf16_extra are other (made-up) flags, not the ones asked about.
  const auto near = parse_cpu_features("flags : amx_bf16x avx512_bf16_extra avx512fx\n");
  CHECK(near.known);
  CHECK_FALSE(near.amx_bf16);
  CHECK_FALSE(near.avx512_bf16);
  CHECK_FALSE(near.avx512f);
  const auto none = parse_cpu_features("processor : 0\nmodel name : something\n");
  CHECK_FALSE(none.known);
  CHECK_FALSE(none.amx_bf16);
}

TEST_CASE("cpu features of this machine agree with its /proc/cpuinfo", "[util]") {
  std::ifstream in("/proc/cpuinfo");
  if (!in) NMT_SKIP("no /proc/cpuinfo here");
  const auto here = nmt::detect_cpu_features();
  CHECK(here.known);
  CHECK_FALSE(here.model_name.empty());
}
