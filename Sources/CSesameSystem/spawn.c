#define _GNU_SOURCE
#include <spawn.h>
#include "CSesameSystem.h"

int sesame_spawn_file_actions_addclosefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
