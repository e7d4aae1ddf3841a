// job/amp_agreement and agree_amp: amp.mode auto is rank 0's decision on every rank, whatever
// the other ranks' hardware says. 2 ranks as threads, each with a Gloo Communicator on
// 127.0.0.1, their CPUs' flags mocked differently.
#include "catch_torch.h"

#include <chrono>
#include <string>
#include <vector>

#include "config/run_config.h"
#include "dist/device.h"
#include "dist/launcher.h"
#include "dist/process_group.h"
#include "job/amp_agreement.h"
#include "job/job_fixture.h"
#include "job/rank_setup.h"
#include "rank_threads.h"
#include "test_support.h"
#include "util/error.h"

using namespace std::chrono_literals;
using nmt::amp::AmpChoice;
using nmt::amp::AmpMode;
using nmt::job::AmpTimes;

namespace {

/// A CPU-only machine whose CPU has (or lacks) AVX512-BF16.
nmt::dist::DeviceInfo cpu_machine(bool bf16) {
  nmt::dist::DeviceInfo devices;
  devices.cpu_cores = 2;
  devices.no_cuda_reason = "test";
  devices.cpu.known = true;
  devices.cpu.avx512f = true;
  devices.cpu.avx512_bf16 = bf16;
  devices.cpu.model_name = bf16 ? "mock CPU with AVX512-BF16" : "mock CPU without";
  return devices;
}

nmt::dist::CommunicatorOptions options(int port, int rank) {
  nmt::dist::CommunicatorOptions o;
  o.master_addr = "127.0.0.1";
  o.master_port = port;
  o.rank = rank;
  o.world_size = 2;
  o.timeout = 5s;  // a rank that waits for a gather the other never makes fails in time
  return o;
}

/// What each rank ended with.
struct RankResult {
  AmpChoice choice;
  int timed = 0;                       ///< calls of its timing function
  std::vector<std::string> after;      ///< a gather made after the agreement
};

/// Both ranks resolve amp.mode auto on their own machine (rank r on `machines[r]`), take rank
/// 0's choice, settle it with `times[r]` when it needs timing, then gather once more.
std::vector<RankResult> agree(const std::vector<nmt::dist::DeviceInfo>& machines,
                              const std::vector<AmpTimes>& times) {
  const int port = nmt::dist::find_free_port();
  std::vector<RankResult> results(2);
  const auto errors = nmt::test::run_ranks(2, [&](int r) {
    nmt::dist::Communicator comm(options(port, r));
    nmt::config::RunConfig config;
    config.amp.mode = std::nullopt;  // auto
    RankResult& out = results[static_cast<size_t>(r)];
    out.choice = nmt::job::agree_amp(config.amp, machines[static_cast<size_t>(r)], &comm);
    if (out.choice.needs_timing) {
      out.choice = nmt::job::settle_amp_choice(&comm, out.choice, [&] {
        ++out.timed;
        return times[static_cast<size_t>(r)];
      });
    }
    // Every later gather pairs with the same gather of the other rank.
    out.after = comm.all_gather_strings("after " + std::to_string(r));
  });
  nmt::test::require_no_errors(errors);
  return results;
}

}  // namespace

TEST_CASE("amp auto: rank 0's bf16 CPU decides by its timing for a rank whose CPU has no bf16",
          "[job][gloo]") {
  // Rank 0 times bf16 2x faster; rank 1 (which alone would pick fp32 untimed) times it slower.
  const std::vector<RankResult> results =
      agree({cpu_machine(true), cpu_machine(false)}, {{1.0, 0.5}, {0.5, 1.0}});
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    const RankResult& got = results[static_cast<size_t>(r)];
    CHECK(got.choice.mode == AmpMode::kBf16);
    CHECK(got.choice.automatic);
    CHECK_FALSE(got.choice.needs_timing);
    CHECK_THAT(got.choice.reason, Catch::Matchers::Contains("CPU with AVX512-BF16") &&
                                      Catch::Matchers::Contains("(2.00x, >= 1.05x): bf16"));
    CHECK(got.timed == 1);  // every rank times, so ranks that share a machine share it
    CHECK(got.after == std::vector<std::string>{"after 0", "after 1"});
  }
  CHECK(results[0].choice.reason == results[1].choice.reason);
}

TEST_CASE("amp auto: rank 0's CPU without bf16 decides fp32 for a rank whose CPU has it",
          "[job][gloo]") {
  const std::vector<RankResult> results =
      agree({cpu_machine(false), cpu_machine(true)}, {{1.0, 0.5}, {1.0, 0.5}});
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    const RankResult& got = results[static_cast<size_t>(r)];
    CHECK(got.choice.mode == AmpMode::kOff);
    CHECK_THAT(got.choice.reason, Catch::Matchers::Contains("CPU without AVX512-BF16"));
    CHECK(got.timed == 0);  // nobody times: rank 0 needs no timing
    CHECK(got.after == std::vector<std::string>{"after 0", "after 1"});
  }
}

TEST_CASE("amp auto: a choice survives its hand-over, and a garbled one is named malformed",
          "[job]") {
  AmpChoice choice{AmpMode::kBf16, true, true, "CPU with AMX-BF16: timed\nover two lines"};
  const AmpChoice back = nmt::job::decode_amp_choice(nmt::job::encode_amp_choice(choice), 1);
  CHECK(back.mode == choice.mode);
  CHECK(back.automatic == choice.automatic);
  CHECK(back.needs_timing == choice.needs_timing);
  CHECK(back.reason == choice.reason);
  for (const std::string bad : {"", "bf16", "bf17\n1\n0\nwhy", "off\n2\n0\nwhy", "0.25 0.5"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_WITH(nmt::job::decode_amp_choice(bad, 1),
                      Catch::Matchers::Contains("rank 1: rank 0's amp.mode decision is malformed"));
  }
  // One process: its own choice and its own timing.
  const AmpChoice pending = nmt::amp::choose_amp_mode({false, 0, cpu_machine(true).cpu});
  REQUIRE(pending.needs_timing);
  CHECK(nmt::job::agree_amp_choice(nullptr, pending).needs_timing);
  CHECK(nmt::job::settle_amp_choice(nullptr, pending, [] { return AmpTimes{1.0, 2.0}; }).mode ==
        AmpMode::kOff);
}

TEST_CASE("amp agreement: amp auto reads the GPUs' compute capability, the lowest", "[job]") {
  nmt::dist::DeviceInfo gpus = nmt::test::one_cpu();
  gpus.cuda_devices = 2;
  gpus.cuda_capabilities = {90, 75};
  CHECK(nmt::job::amp_hardware(gpus).cuda);
  CHECK(nmt::job::amp_hardware(gpus).min_cuda_capability == 75);
  nmt::amp::AmpOptions options;
  options.mode = std::nullopt;  // auto
  CHECK(nmt::job::choose_amp(options, gpus).mode == nmt::amp::AmpMode::kOff);
  gpus.cuda_capabilities = {90, 80};
  CHECK(nmt::job::choose_amp(options, gpus).mode == nmt::amp::AmpMode::kBf16);
  // A named mode is taken as it is.
  options.mode = nmt::amp::AmpMode::kFp16;
  CHECK(nmt::job::choose_amp(options, gpus).mode == nmt::amp::AmpMode::kFp16);
  CHECK_FALSE(nmt::job::choose_amp(options, gpus).automatic);
}
