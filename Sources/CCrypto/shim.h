#ifndef SESAME_CCRYPTO_SHIM_H
#define SESAME_CCRYPTO_SHIM_H

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/err.h>
#include <openssl/crypto.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/rsa.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>

/// A new RSA key pair of `bits` bits (EVP_RSA_gen is a macro over the variadic EVP_PKEY_Q_keygen).
static inline EVP_PKEY *sesame_rsa_generate(unsigned int bits) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)bits);
}

/// A new EC key pair on the P-256 curve (EVP_EC_gen is a macro over the variadic EVP_PKEY_Q_keygen).
static inline EVP_PKEY *sesame_p256_generate(void) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}

/// EVP_PKEY_PUBLIC_KEY, a compound macro Swift cannot import.
static inline int sesame_evp_pkey_public_key_selection(void) { return EVP_PKEY_PUBLIC_KEY; }

#endif
