#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <time.h>

#include "CSesameSystem.h"

int sesame_poll_nanoseconds(struct pollfd *fds, nfds_t count, long long nanoseconds) {
    struct timespec timeout = {
        .tv_sec = (time_t)(nanoseconds / 1000000000LL),
        .tv_nsec = (long)(nanoseconds % 1000000000LL),
    };
    return ppoll(fds, count, &timeout, NULL);
}
