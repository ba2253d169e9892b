#ifndef SESAME_BENCH_SUPPORT_H
#define SESAME_BENCH_SUPPORT_H

/// Writes the CPUs this process may run on (its affinity mask, which a container or `taskset`
/// may have narrowed) into `cpus`, lowest first, up to `capacity`; returns how many, or -1 with
/// errno set.
int sesame_bench_allowed_cpus(int *cpus, int capacity);

/// Lets the thread `tid` (a Linux thread ID, as listed in /proc/self/task) run only on the
/// `count` CPUs in `cpus`. Threads it creates afterwards inherit the set. Returns 0, or -1 with
/// errno set (ESRCH when the thread has exited meanwhile).
int sesame_bench_pin_thread(int tid, const int *cpus, int count);

#endif
