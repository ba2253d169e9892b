#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <string.h>

#include "CSesameSystem.h"

// Finds libcrypto.so.3 among the objects already in the process and copies its path.
static int sesame_find_libcrypto(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    const char *name = info->dlpi_name;
    if (name == NULL) return 0;
    const char *base = strrchr(name, '/');
    base = base == NULL ? name : base + 1;
    if (strcmp(base, "libcrypto.so.3") != 0) return 0;
    *(const char **)data = name;
    return 1;
}

void sesame_openssl_thread_stop_if_loaded(void) {
    // The loader's list, not dlopen: a process without libcrypto neither loads it nor even
    // looks for its file here (`sesame token` must not: see HotPathTests).
    const char *path = NULL;
    if (dl_iterate_phdr(sesame_find_libcrypto, &path) == 0 || path == NULL) return;
    void *crypto = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (crypto == NULL) return;
    void (*stop)(void) = (void (*)(void))dlsym(crypto, "OPENSSL_thread_stop");
    if (stop != NULL) stop();
    dlclose(crypto);
}
