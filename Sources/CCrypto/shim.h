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

/// A public key of `type` ("RSA" or "EC") from parameters built by `push`-style calls.
///
/// Kept in C because OSSL_PARAM_BLD stores the key names and octet buffers by pointer until
/// OSSL_PARAM_BLD_to_param, which Swift's temporary pointers do not outlive.
static inline EVP_PKEY *sesame_public_key_from_params(const char *type, OSSL_PARAM_BLD *builder) {
    EVP_PKEY *key = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(builder);
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (params != NULL && context != NULL && EVP_PKEY_fromdata_init(context) == 1) {
        if (EVP_PKEY_fromdata(context, &key, EVP_PKEY_PUBLIC_KEY, params) != 1) key = NULL;
    }
    EVP_PKEY_CTX_free(context);
    OSSL_PARAM_free(params);
    return key;
}

/// An RSA public key from its big-endian modulus and exponent.
static inline EVP_PKEY *sesame_rsa_public_key(const unsigned char *n, size_t n_length, const unsigned char *e,
                                              size_t e_length) {
    EVP_PKEY *key = NULL;
    BIGNUM *bn_n = BN_bin2bn(n, (int)n_length, NULL);
    BIGNUM *bn_e = BN_bin2bn(e, (int)e_length, NULL);
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    if (bn_n != NULL && bn_e != NULL && builder != NULL
        && OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_N, bn_n) == 1
        && OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_E, bn_e) == 1) {
        key = sesame_public_key_from_params("RSA", builder);
    }
    OSSL_PARAM_BLD_free(builder);
    BN_free(bn_n);
    BN_free(bn_e);
    return key;
}

/// An EC public key on P-256 from its uncompressed point (0x04 || x || y, 65 bytes).
static inline EVP_PKEY *sesame_p256_public_key(const unsigned char *point, size_t length) {
    EVP_PKEY *key = NULL;
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    if (builder != NULL
        && OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1
        && OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, point, length) == 1) {
        key = sesame_public_key_from_params("EC", builder);
    }
    OSSL_PARAM_BLD_free(builder);
    return key;
}

#endif
