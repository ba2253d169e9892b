#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "CSesameSystem.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

// The start of the executable's writable data (glibc's crt1) and the end of its zero-filled
// data (the linker). Weak, so that this file in a shared library, where the executable may not
// export them, loads all the same: the call then does nothing.
extern char __data_start[] __attribute__((weak));
extern char _end[] __attribute__((weak));

void sesame_prefault_writable_data(void) {
    if (__data_start == NULL || _end == NULL) return;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    uintptr_t mask = (uintptr_t)page - 1;
    uintptr_t start = (uintptr_t)__data_start & ~mask;
    uintptr_t end = ((uintptr_t)_end + mask) & ~mask;
    if (end > start) (void)madvise((void *)start, end - start, MADV_POPULATE_WRITE);
}
