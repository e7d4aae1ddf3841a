// util/cpu_count: the CPUs this process may use, not the machine's: its affinity mask and its
// cgroup's CFS quota bound the threads it starts.
#include <catch2/catch.hpp>

#include <sched.h>

#include <thread>

#include "util/cpu_count.h"

TEST_CASE("cpu_count: a cgroup v2 cpu.max gives its quota in CPUs", "[cpu_count]") {
  CHECK(nmt::cpu_max_quota("200000 100000\n") == 2.0);
  CHECK(nmt::cpu_max_quota("150000 100000") == 1.5);
  CHECK_FALSE(nmt::cpu_max_quota("max 100000\n"));
  CHECK_FALSE(nmt::cpu_max_quota(""));
  CHECK_FALSE(nmt::cpu_max_quota("12x 100000"));
  CHECK_FALSE(nmt::cpu_max_quota("0 100000"));
}

TEST_CASE("cpu_count: a thread pinned to one CPU may use one", "[cpu_count]") {
  // hardware_concurrency() counted the machine's: a job given 8 of 128 cores started 128
  // encoding threads.
  CHECK(nmt::usable_cpus() >= 1);
  int pinned = 0;
  std::thread one_cpu([&pinned] {
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(::sched_getaffinity(0, sizeof(set), &set) == 0);
    int first = 0;
    while (!CPU_ISSET(first, &set)) ++first;
    CPU_ZERO(&set);
    CPU_SET(first, &set);
    REQUIRE(::sched_setaffinity(0, sizeof(set), &set) == 0);  // this thread's mask only
    pinned = nmt::usable_cpus();
  });
  one_cpu.join();
  CHECK(pinned == 1);
}
