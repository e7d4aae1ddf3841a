#include "catch_torch.h"  // first: see the header

#include <fstream>

#include <ATen/ATen.h>

#include <c10/core/CPUAllocator.h>

#include "dist/host_allocator.h"
#include "test_support.h"

using nmt::dist::host_allocator_stats;

TEST_CASE("the caching host allocator reuses freed large blocks, not small ones",
          "[dist][allocator]") {
  nmt::dist::install_caching_host_allocator();
  nmt::dist::install_caching_host_allocator();  // idempotent
  const auto before = host_allocator_stats();
  const void* first = nullptr;
  {
    const at::Tensor big = at::empty({1 << 20}, at::kFloat);  // 4 MiB
    first = big.data_ptr();
    CHECK(host_allocator_stats().in_use_bytes - before.in_use_bytes >= (4 << 20));
  }
  CHECK(host_allocator_stats().in_use_bytes == before.in_use_bytes);
  {
    // A little smaller: served by the same block.
    const at::Tensor again = at::empty({(1 << 20) - 1000}, at::kFloat);
    CHECK(again.data_ptr() == first);
    CHECK(host_allocator_stats().reused == before.reused + 1);
    // Far larger: a fresh block.
    const at::Tensor larger = at::empty({2 << 20}, at::kFloat);
    CHECK(larger.data_ptr() != first);
    CHECK(host_allocator_stats().fresh >= before.fresh + 2);
  }
  // Small tensors stay with the system allocator.
  const auto mid = host_allocator_stats();
  const at::Tensor small = at::ones({1000}, at::kFloat);
  CHECK(host_allocator_stats().fresh == mid.fresh);
  CHECK(host_allocator_stats().reused == mid.reused);
  // Reused memory holds what is written into it, like any other.
  const at::Tensor values = at::arange(1 << 20, at::kFloat);
  CHECK(values[12345].item<float>() == 12345.0f);
  CHECK(small.sum().item<float>() == 1000.0f);
}

TEST_CASE("raw allocations through the caching host allocator round-trip", "[dist][allocator]") {
  // Kernels such as bfloat16 matrix products take scratch space with raw_allocate.
  nmt::dist::install_caching_host_allocator();
  c10::Allocator* allocator = c10::GetCPUAllocator();
  for (size_t bytes : {size_t{100}, size_t{3} << 20}) {
    void* p = allocator->raw_allocate(bytes);
    REQUIRE(p != nullptr);
    static_cast<char*>(p)[bytes - 1] = 7;
    allocator->raw_deallocate(p);
  }
  const at::Tensor a = at::randn({300, 300}).to(at::kBFloat16);
  const at::Tensor product = at::mm(a, a);
  CHECK(product.size(0) == 300);
}

TEST_CASE("the caching host allocator keeps the peak of its blocks in use until reset",
          "[dist][allocator]") {
  nmt::dist::install_caching_host_allocator();
  CHECK(nmt::dist::host_allocator_installed());
  nmt::dist::reset_host_allocator_peak();
  const auto before = host_allocator_stats();
  CHECK(before.peak_in_use_bytes == before.in_use_bytes);
  {
    const at::Tensor a = at::empty({4 << 20}, at::kFloat);  // 16 MiB
    const at::Tensor b = at::empty({2 << 20}, at::kFloat);  // 8 MiB
  }
  const auto after = host_allocator_stats();
  CHECK(after.in_use_bytes == before.in_use_bytes);
  CHECK(after.peak_in_use_bytes >= before.in_use_bytes + (24 << 20));
  CHECK(after.peak_in_use_bytes < before.in_use_bytes + (25 << 20));
  nmt::dist::reset_host_allocator_peak();
  CHECK(host_allocator_stats().peak_in_use_bytes == after.in_use_bytes);
}

TEST_CASE("the host cache is capped by the cgroup's memory limit and shared by local workers",
          "[dist][allocator]") {
  using nmt::dist::memory_limit_bytes;
  nmt::test::TempDir root;
  const int64_t ram = int64_t{64} << 30;
  const auto write = [&](const std::filesystem::path& rel, const std::string& text) {
    std::filesystem::create_directories((root.path() / rel).parent_path());
    std::ofstream(root.path() / rel) << text;
  };
  // No cgroup files: physical memory.
  CHECK(memory_limit_bytes("0::/job\n", root.path(), ram) == ram);
  // cgroup v2: the process's own cgroup, or the mount's root inside a container; "max" is none.
  write("job/memory.max", "8589934592\n");
  CHECK(memory_limit_bytes("0::/job\n", root.path(), ram) == int64_t{8} << 30);
  write("memory.max", "max\n");
  CHECK(memory_limit_bytes("0::/job\n", root.path(), ram) == int64_t{8} << 30);
  write("memory.max", "4294967296\n");
  CHECK(memory_limit_bytes("0::/elsewhere\n", root.path(), ram) == int64_t{4} << 30);
  // cgroup v1: the memory controller's limit; its "no limit" is near 2^63.
  nmt::test::TempDir v1;
  std::filesystem::create_directories(v1.path() / "memory");
  std::ofstream(v1.path() / "memory" / "memory.limit_in_bytes") << "9223372036854771712\n";
  CHECK(memory_limit_bytes("4:memory:/x\n0::/\n", v1.path(), ram) == ram);
  std::ofstream(v1.path() / "memory" / "memory.limit_in_bytes") << "2147483648\n";
  CHECK(memory_limit_bytes("4:cpu,memory:/x\n", v1.path(), ram) == int64_t{2} << 30);
  // A quarter of the limit, divided among the workers that cache on the machine.
  using nmt::dist::default_host_cache_bytes;
  CHECK(default_host_cache_bytes(int64_t{8} << 30, 1) == size_t{2} << 30);
  CHECK(default_host_cache_bytes(int64_t{8} << 30, 4) == size_t{512} << 20);
  CHECK(default_host_cache_bytes(0, 2) == size_t{1} << 30);
  CHECK(memory_limit_bytes() > 0);
}
