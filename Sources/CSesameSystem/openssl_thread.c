#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

#include "CSesameSystem.h"

void sesame_openssl_thread_stop_if_loaded(void) {
    // RTLD_NOLOAD: a handle only if libcrypto is in the process already (Sesame's own dlopen, or
    // libcurl's dependency); it is never loaded here.
    void *crypto = dlopen("libcrypto.so.3", RTLD_LAZY | RTLD_NOLOAD);
    if (crypto == NULL) return;
    void (*stop)(void) = (void (*)(void))dlsym(crypto, "OPENSSL_thread_stop");
    if (stop != NULL) stop();
    dlclose(crypto);
}
