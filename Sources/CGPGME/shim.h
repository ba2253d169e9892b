#ifndef SESAME_CGPGME_SHIM_H
#define SESAME_CGPGME_SHIM_H

// GPGME, GnuPG's library (libgpgme-dev), for SesamePass. Swift calls GPGME's own functions
// directly; the wrappers below exist only where Swift cannot: gpgme_check_version is a macro
// that passes the size of a structure to the real function, and the error-code accessors are
// inline functions over libgpg-error's bit layout that are simplest to call from here.

#include <gpgme.h>

/// Initialises GPGME (the macro gpgme_check_version(NULL)); returns its version.
static inline const char *sesame_gpgme_init(void) {
    return gpgme_check_version(NULL);
}

/// The error code of a GPGME error, without its source.
static inline int sesame_gpgme_code(gpgme_error_t error) {
    return (int)gpgme_err_code(error);
}

#endif
