#define _GNU_SOURCE
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "CSesameSystem.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

// The start of the executable's writable data (glibc's crt1) and the end of its zero-filled
// data (the linker).
extern char __data_start[];
extern char _end[];

void sesame_prefault_writable_data(void) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    uintptr_t mask = (uintptr_t)page - 1;
    uintptr_t start = (uintptr_t)__data_start & ~mask;
    uintptr_t end = ((uintptr_t)_end + mask) & ~mask;
    if (end > start) (void)madvise((void *)start, end - start, MADV_POPULATE_WRITE);
}
