#include "dist/device.h"

#include <sys/resource.h>

#include <exception>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include <c10/core/Device.h>
#include <c10/util/Exception.h>
#include <c10/util/Logging.h>
#include <fmt/format.h>
#if __has_include(<torch/headeronly/version.h>)
#include <torch/headeronly/version.h>
#else
#include <torch/version.h>
#endif

#ifdef NMT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/cuda/nccl.h>
#endif

#include "util/error.h"
#include "util/cpu_count.h"

namespace nmt::dist {

void show_libtorch_logs(bool show) {
  FLAGS_caffe2_log_level = show ? 0 : 3;  // 3: fatal only
  c10::UpdateLoggingLevelsFromFlags();
}

int64_t peak_host_memory_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
}

HostMemory parse_host_memory(const std::string& proc_status) {
  HostMemory memory;
  std::istringstream lines(proc_status);
  std::string line;
  while (std::getline(lines, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    int64_t* into = key == "RssAnon"                        ? &memory.private_bytes
                    : key == "RssFile" || key == "RssShmem" ? &memory.shared_bytes
                                                            : nullptr;
    if (into == nullptr) continue;
    int64_t kilobytes = 0;
    std::istringstream(line.substr(colon + 1)) >> kilobytes;  // "   1234 kB"
    *into += kilobytes * 1024;
  }
  return memory;
}

HostMemory host_memory_now() {
  std::ifstream file("/proc/self/status");
  std::stringstream text;
  text << file.rdbuf();
  return parse_host_memory(text.str());
}

int64_t peak_cuda_memory_bytes(int index) {
#ifdef NMT_WITH_CUDA
  if (index < 0 || index >= c10::cuda::device_count()) return 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
#else
  (void)index;
  return 0;
#endif
}

CudaMemory cuda_memory(int index) {
  CudaMemory m;
#ifdef NMT_WITH_CUDA
  if (index < 0 || index >= c10::cuda::device_count()) return m;
  const auto device = static_cast<c10::DeviceIndex>(index);
  c10::cuda::CUDAGuard guard(device);
  size_t free = 0, total = 0;
  C10_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  m.free = static_cast<int64_t>(free);
  m.total = static_cast<int64_t>(total);
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  m.allocated = stats.allocated_bytes[aggregate].current;
  m.reserved = stats.reserved_bytes[aggregate].current;
#else
  (void)index;
#endif
  return m;
}

void reset_peak_cuda_memory(int index) {
#ifdef NMT_WITH_CUDA
  if (index < 0 || index >= c10::cuda::device_count()) return;
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(index));
#else
  (void)index;
#endif
}

void release_cached_cuda_memory() {
#ifdef NMT_WITH_CUDA
  if (c10::cuda::device_count() > 0) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

bool is_out_of_memory(const std::exception& error) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr) return true;
  // What the libraries say when an allocation of their own fails; LibTorch passes these on as
  // a plain c10::Error (or a DistError of ours naming the NCCL call).
  static constexpr std::string_view kMarks[] = {
      "out of memory",            // CUDA runtime ("CUDA error: out of memory"), NCCL
      "CUBLAS_STATUS_ALLOC_FAILED",
      "CUDNN_STATUS_ALLOC_FAILED",
      "cudaErrorMemoryAllocation",
      "CUDA_ERROR_OUT_OF_MEMORY",  // driver API
      "Failed to CUDA calloc",     // NCCL's own buffers
  };
  const std::string_view what = error.what();
  for (std::string_view mark : kMarks)
    if (what.find(mark) != std::string_view::npos) return true;
  return false;
}

BackendChoice choose_backend(Backend requested, bool on_gpu, int64_t local_ranks, int gpus,
                             const std::string& no_cuda_reason) {
  NMT_CHECK(!(requested == Backend::kNccl && !on_gpu), ConfigError,
            "dist.backend nccl needs CUDA devices, but {}", no_cuda_reason);
  const bool shared = on_gpu && local_ranks > gpus;
  NMT_CHECK(!(requested == Backend::kNccl && shared), ConfigError,
            "dist.backend nccl: {} ranks on this node share {} GPU(s), and NCCL needs a GPU per "
            "rank; run at most {} worker(s) here (--nproc-per-node) or use dist.backend gloo",
            local_ranks, gpus, gpus);
  BackendChoice choice;
  choice.nccl = on_gpu && requested != Backend::kGloo && !shared;
  if (shared && requested == Backend::kAuto) {
    choice.note = fmt::format("{} ranks on this node share {} GPU(s): NCCL needs a GPU per rank, "
                              "so the collectives use Gloo", local_ranks, gpus);
  }
  return choice;
}

std::string describe_gpu_workers(Backend requested, int64_t workers, int gpus) {
  std::string backend;
  try {
    backend = choose_backend(requested, true, workers, gpus, "").nccl ? "NCCL" : "Gloo";
  } catch (const ConfigError& e) {
    backend = fmt::format("NCCL refused: {}", e.what());
  }
  const std::string placement =
      workers == gpus  ? "one per GPU"
      : workers > gpus ? fmt::format("sharing {} GPU(s)", gpus)
                       : fmt::format("on {} of {} GPU(s)", workers, gpus);
  return fmt::format("{} worker(s), {}, {}", workers, placement, backend);
}

int64_t ranks_on_device(int64_t local_rank, int64_t local_ranks, int gpus) {
  if (gpus <= 0) return 1;
  const int64_t device = local_rank % gpus;
  return std::max<int64_t>(1, (local_ranks - device + gpus - 1) / gpus);
}

void use_cuda_device(int index) {
#ifdef NMT_WITH_CUDA
  if (index < 0 || index >= c10::cuda::device_count()) return;
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
#else
  (void)index;
#endif
}

void synchronize_cuda(int index) {
#ifdef NMT_WITH_CUDA
  if (index < 0 || index >= c10::cuda::device_count()) return;
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index));
  c10::cuda::device_synchronize();
#else
  (void)index;
#endif
}

DeviceInfo probe_devices() {
  DeviceInfo info;
  info.torch_version = TORCH_VERSION;
  info.cpu_cores = usable_cpus();  // the process's share of the machine (util/cpu_count.h)
  info.cpus_bound_apart = cpus_bound_apart();
  info.cpu = detect_cpu_features();
#ifdef NMT_WITH_CUDA
  info.cuda_compiled = true;
#ifdef CUDA_VERSION
  info.cuda_version = fmt::format("{}.{}", CUDA_VERSION / 1000, (CUDA_VERSION % 1000) / 10);
#endif
  const uint64_t nccl = torch::cuda::nccl::version();
  // torch packs it as major << 32 | minor << 16 | patch.
  info.nccl_version =
      fmt::format("{}.{}.{}", nccl >> 32, (nccl >> 16) & 0xffff, nccl & 0xffff);
  // device_count() reports 0 (rather than throwing) without a driver or device.
  info.cuda_devices = c10::cuda::device_count();
  for (int i = 0; i < info.cuda_devices; ++i) {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(i));
    info.device_names.push_back(fmt::format("{}, {:.1f} GiB, sm_{}{}", p->name,
                                            p->totalGlobalMem / double(1ull << 30), p->major,
                                            p->minor));
    info.cuda_capabilities.push_back(p->major * 10 + p->minor);
  }
  if (info.cuda_devices == 0) info.no_cuda_reason = "no CUDA device visible to this process";
#else
  info.no_cuda_reason = "built without CUDA (NMT_WITH_CUDA=OFF)";
#endif
  return info;
}

}  // namespace nmt::dist
