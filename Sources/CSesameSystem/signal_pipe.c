#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "CSesameSystem.h"

// The descriptor each caught signal is written to, plus one; 0 when none. Read by the handler,
// which may run on any thread while another clears it: set before the handler is installed,
// cleared after it is removed. Atomic (lock-free, so safe in a handler): a plain or volatile int
// read in the handler and written by another thread is a data race (ThreadSanitizer saw one).
static atomic_int signal_descriptors[65];

static void write_signal_byte(int number) {
    int saved = errno;
    int descriptor = atomic_load(&signal_descriptors[number]) - 1;
    if (descriptor >= 0) {
        unsigned char byte = (unsigned char)number;
        ssize_t ignored = write(descriptor, &byte, 1);
        (void)ignored;
    }
    errno = saved;
}

int sesame_signal_to_descriptor(int number, int descriptor, struct sigaction *previous) {
    if (number <= 0 || number > 64) return EINVAL;
    atomic_store(&signal_descriptors[number], descriptor + 1);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = write_signal_byte;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (sigaction(number, &action, previous) != 0) {
        int error = errno;
        atomic_store(&signal_descriptors[number], 0);
        return error;
    }
    return 0;
}

int sesame_signal_restore(int number, const struct sigaction *previous) {
    if (number <= 0 || number > 64) return EINVAL;
    int status = sigaction(number, previous, NULL) == 0 ? 0 : errno;
    atomic_store(&signal_descriptors[number], 0);
    return status;
}
