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

TEST_CASE("cpu_count: a cpuset list counts its CPUs, and a narrower mask is bound apart",
          "[cpu_count]") {
  // usable_cpus() is the worker's own under Slurm's --cpu-bind: dividing it among the node's
  // workers again left 8 / 4 = 2 threads on 8 CPUs. cpus_bound_apart tells the two apart.
  CHECK(nmt::cpu_list_count("0-3,8,10-11\n") == 7);
  CHECK(nmt::cpu_list_count("5") == 1);
  CHECK(nmt::cpu_list_count("3-1") == 0);
  CHECK(nmt::cpu_list_count("a-b") == 0);
  bool whole = true, pinned = false;
  std::thread one_cpu([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(::sched_getaffinity(0, sizeof(set), &set) == 0);
    whole = nmt::cpus_bound_apart();
    if (CPU_COUNT(&set) < 2) return;  // one CPU: nothing narrower to pin to
    int first = 0;
    while (!CPU_ISSET(first, &set)) ++first;
    CPU_ZERO(&set);
    CPU_SET(first, &set);
    REQUIRE(::sched_setaffinity(0, sizeof(set), &set) == 0);
    pinned = nmt::cpus_bound_apart();
  });
  one_cpu.join();
  // A process that is bound apart already (a CI runner pinned to some of its cgroup's CPUs)
  // shows nothing more when pinned to one.
  if (whole) WARN("this process is bound to CPUs of its own already");
  if (!whole && std::thread::hardware_concurrency() >= 2) CHECK(pinned);
}
