#include "catch_torch.h"  // first: see the header

#include <ATen/ATen.h>

#include "dist/host_allocator.h"

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
