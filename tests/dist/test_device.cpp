
#include "catch_torch.h"  // first: see the header
#include "skip.h"

#include <sched.h>

#include <stdexcept>
#include <thread>

#include <c10/util/Exception.h>

#include "dist/device.h"

TEST_CASE("device probe reports the LibTorch build and never fails without a GPU", "[dist]") {
  const nmt::dist::DeviceInfo info = nmt::dist::probe_devices();
  CHECK(info.torch_version.rfind("2.", 0) == 0);
  CHECK(info.cpu_cores >= 1);
#ifdef NMT_WITH_CUDA
  CHECK(info.cuda_compiled);
  // A real NCCL 2.x version, e.g. "2.28.9".
  CHECK_THAT(info.nccl_version, Catch::Matchers::Matches(R"(2\.[0-9]{1,2}\.[0-9]{1,3})"));
  CHECK_FALSE(info.cuda_version.empty());
#else
  CHECK_FALSE(info.cuda_compiled);
#endif
  CHECK(info.device_names.size() == static_cast<size_t>(info.cuda_devices));
  if (info.cuda_devices == 0) CHECK_FALSE(info.no_cuda_reason.empty());
}

TEST_CASE("a visible GPU is described by name, memory and architecture", "[dist][cuda]") {
  const nmt::dist::DeviceInfo info = nmt::dist::probe_devices();
  if (info.cuda_devices == 0) {
    NMT_SKIP_WITHOUT_CUDA(info.no_cuda_reason);
  }
  for (const std::string& name : info.device_names) {
    CHECK_THAT(name, Catch::Matchers::Contains("GiB, sm_"));
  }
}

TEST_CASE("a device index past the GPUs has zero memory figures", "[dist]") {
  const nmt::dist::DeviceInfo info = nmt::dist::probe_devices();
  const nmt::dist::CudaMemory none = nmt::dist::cuda_memory(info.cuda_devices);  // out of range
  CHECK(none.total == 0);
  CHECK(none.free == 0);
}

TEST_CASE("a GPU's memory figures are consistent", "[dist][cuda]") {
  const nmt::dist::DeviceInfo info = nmt::dist::probe_devices();
  if (info.cuda_devices == 0) {
    NMT_SKIP_WITHOUT_CUDA(info.no_cuda_reason);
  }
  const nmt::dist::CudaMemory m = nmt::dist::cuda_memory(0);
  CHECK(m.total > 0);
  CHECK(m.free > 0);
  CHECK(m.free <= m.total);
  CHECK(m.allocated <= m.reserved);
  nmt::dist::reset_peak_cuda_memory(0);
  CHECK(nmt::dist::peak_cuda_memory_bytes(0) == m.allocated);
}

TEST_CASE("backend auto is NCCL with a GPU per rank, Gloo when ranks share GPUs or on CPU",
          "[dist]") {
  using nmt::dist::Backend;
  using nmt::dist::choose_backend;
  CHECK(choose_backend(Backend::kAuto, true, 8, 8, "").nccl);
  CHECK(choose_backend(Backend::kAuto, true, 8, 8, "").note.empty());
  CHECK_FALSE(choose_backend(Backend::kAuto, false, 2, 0, "no GPU").nccl);
  // Two ranks on one GPU (the H200 check machine's CTest runs): Gloo, with the reason.
  const auto shared = choose_backend(Backend::kAuto, true, 2, 1, "");
  CHECK_FALSE(shared.nccl);
  CHECK_THAT(shared.note, Catch::Matchers::Contains("2 ranks on this node share 1 GPU(s)"));
  CHECK_FALSE(choose_backend(Backend::kGloo, true, 1, 1, "").nccl);
  CHECK(choose_backend(Backend::kNccl, true, 1, 1, "").nccl);
  CHECK_THROWS_WITH(choose_backend(Backend::kNccl, true, 2, 1, ""),
                    Catch::Matchers::Contains("NCCL needs a GPU per rank"));
  CHECK_THROWS_WITH(choose_backend(Backend::kNccl, false, 1, 0, "no driver"),
                    "dist.backend nccl needs CUDA devices, but no driver");
}

TEST_CASE("out of memory is recognized in every form the libraries report it", "[dist]") {
  using nmt::dist::is_out_of_memory;
  // The forms a GPU run meets; only LibTorch's own arrives as c10::OutOfMemoryError.
  CHECK(is_out_of_memory(c10::OutOfMemoryError({"f", "file.cpp", 1}, "CUDA out of memory.")));
  CHECK(is_out_of_memory(c10::Error({"f", "file.cpp", 1},
                                    "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
                                    "`cublasCreate(handle)`")));
  CHECK(is_out_of_memory(c10::Error({"f", "file.cpp", 1}, "CUDA error: out of memory")));
  CHECK(is_out_of_memory(std::runtime_error(
      "NCCL error in: ProcessGroupNCCL.cpp:1, unhandled cuda error, NCCL version 2.27: "
      "Cuda failure 'out of memory'")));
  CHECK(is_out_of_memory(std::runtime_error("include/alloc.h:99 NCCL WARN Failed to CUDA calloc")));
  // Other failures stay failures: the fit must not hide them as "too large".
  CHECK_FALSE(is_out_of_memory(c10::Error({"f", "file.cpp", 1},
                                          "CUDA error: an illegal memory access was encountered")));
  CHECK_FALSE(is_out_of_memory(std::runtime_error("CUBLAS_STATUS_EXECUTION_FAILED")));
}

TEST_CASE("the plan names the workers' GPUs and the backend they will use", "[dist]") {
  using nmt::dist::Backend;
  using nmt::dist::describe_gpu_workers;
  CHECK(describe_gpu_workers(Backend::kAuto, 8, 8) == "8 worker(s), one per GPU, NCCL");
  CHECK(describe_gpu_workers(Backend::kAuto, 2, 1) == "2 worker(s), sharing 1 GPU(s), Gloo");
  CHECK(describe_gpu_workers(Backend::kGloo, 1, 1) == "1 worker(s), one per GPU, Gloo");
  CHECK(describe_gpu_workers(Backend::kAuto, 1, 8) == "1 worker(s), on 1 of 8 GPU(s), NCCL");
  CHECK_THAT(describe_gpu_workers(Backend::kNccl, 2, 1),
             Catch::Matchers::StartsWith("2 worker(s), sharing 1 GPU(s), NCCL refused: ") &&
                 Catch::Matchers::Contains("NCCL needs a GPU per rank"));
}

TEST_CASE("ranks on a device: local ranks take the GPUs in turn", "[dist]") {
  using nmt::dist::ranks_on_device;
  CHECK(ranks_on_device(0, 2, 1) == 2);  // 2 ranks on one H200
  CHECK(ranks_on_device(1, 2, 1) == 2);
  CHECK(ranks_on_device(3, 8, 8) == 1);
  CHECK(ranks_on_device(0, 3, 2) == 2);  // local ranks 0 and 2 on GPU 0
  CHECK(ranks_on_device(1, 3, 2) == 1);  // local rank 1 alone on GPU 1
  CHECK(ranks_on_device(0, 1, 0) == 1);  // no GPU
}

TEST_CASE("host memory is split into private and shared, as /proc says", "[dist]") {
  const nmt::dist::HostMemory parsed = nmt::dist::parse_host_memory(
      "Name:\tnmt-train\nVmRSS:\t    3000 kB\nRssAnon:\t    1000 kB\n"
      "RssFile:\t    1500 kB\nRssShmem:\t     500 kB\nThreads:\t4\n");
  CHECK(parsed.private_bytes == 1000 * 1024);
  CHECK(parsed.shared_bytes == 2000 * 1024);
  CHECK(nmt::dist::parse_host_memory("").private_bytes == 0);
  // A mapped file's pages count as shared once touched; an allocation as private.
  const nmt::dist::HostMemory now = nmt::dist::host_memory_now();
  CHECK(now.private_bytes > 0);
  CHECK(now.shared_bytes > 0);
}

TEST_CASE("device probe counts the CPUs this process may use, not the machine's", "[dist]") {
  // cpu_cores was hardware_concurrency(): on a node shared by jobs, intra-op and encoding
  // threads followed the machine's cores, not the job's (taskset, --cpus-per-task).
  int cores = 0;
  std::thread one_cpu([&cores] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    if (::sched_setaffinity(0, sizeof(set), &set) != 0) return;  // CPU 0 not ours: see below
    cores = nmt::dist::probe_devices().cpu_cores;
  });
  one_cpu.join();
  if (cores == 0) NMT_SKIP("CPU 0 is outside this process's affinity mask");
  CHECK(cores == 1);
}
