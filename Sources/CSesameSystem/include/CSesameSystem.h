#ifndef SESAME_CSESAMESYSTEM_H
#define SESAME_CSESAMESYSTEM_H

#include <poll.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

/// posix_spawn_file_actions_addclosefrom_np, which glibc declares only under _GNU_SOURCE and
/// Swift's Glibc module therefore does not import.
int sesame_spawn_file_actions_addclosefrom(posix_spawn_file_actions_t *actions, int from);

/// poll(2) with a timeout of `nanoseconds` (≥ 0; ppoll, which glibc declares only under
/// _GNU_SOURCE). Returns what ppoll returns.
int sesame_poll_nanoseconds(struct pollfd *fds, nfds_t count, long long nanoseconds);

#endif
