#ifndef SESAME_CSESAMESYSTEM_H
#define SESAME_CSESAMESYSTEM_H

#include <spawn.h>

/// posix_spawn_file_actions_addclosefrom_np, which glibc declares only under _GNU_SOURCE and
/// Swift's Glibc module therefore does not import.
int sesame_spawn_file_actions_addclosefrom(posix_spawn_file_actions_t *actions, int from);

#endif
