#pragma once
// How many CPUs this process may use, which is what its threads should follow: on a shared
// node a job gets a few of many cores (taskset, Slurm's --cpus-per-task, docker --cpuset-cpus
// set the affinity mask; docker --cpus and Kubernetes CPU limits set a CFS quota), and
// hardware_concurrency() counts the machine's (128 threads on a 128-core node of which the
// job has 8: encoding threads and intra-op threads sixteen times oversubscribed).

#include <optional>
#include <string_view>

namespace nmt {

/// The CPUs in this thread's affinity mask (sched_getaffinity), bounded by the CFS quota of
/// its cgroup and the cgroup's ancestors (v2 cpu.max; v1 cpu.cfs_quota_us over
/// cpu.cfs_period_us), a fractional quota rounded up; at least 1.
int usable_cpus();

/// True when this thread's affinity mask holds fewer CPUs than its cgroup's cpuset (v2
/// cpuset.cpus.effective, v1 cpuset.cpus; the machine's CPUs where neither is found): a
/// launcher bound this process to CPUs of its own (Slurm's --cpu-bind, taskset or numactl per
/// rank), rather than a job's CPUs being shared by its processes.
bool cpus_bound_apart();

/// The CPUs of a cpuset list ("0-3,8,10-11" -> 7); 0 for text that is not one.
int cpu_list_count(std::string_view text);

/// The CPUs of a cgroup v2 cpu.max text, "<quota> <period>" ("200000 100000" -> 2.0); nullopt
/// for no limit ("max 100000") or text that is not that.
std::optional<double> cpu_max_quota(std::string_view text);

}  // namespace nmt
