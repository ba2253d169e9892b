#ifndef SESAME_CCRYPTO_SHIM_H
#define SESAME_CCRYPTO_SHIM_H

// OpenSSL's libcrypto for Swift, loaded when first used rather than when the program starts.
//
// Linked, libcrypto.so.3 costs every process about 3 ms of CPU at start (its relocations and
// constructors: more than a whole `secret-tool lookup`), though most `sesame` commands (`token`,
// `--help`, `switch`, `status` without an app secret) never hash, sign or draw a random number.
// So the program is not linked against it: the first call here opens it with dlopen and resolves
// the functions Sesame uses, once, thread-safely. Swift calls the `sesame_*` wrappers below
// instead of libcrypto's own names; the headers are still OpenSSL's (libssl-dev), so every type
// and constant is checked as before.

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
#include <openssl/bio.h>
#include <openssl/pem.h>

// MARK: Loading

/// libcrypto's functions as Sesame uses them, resolved from libcrypto.so.3.
typedef struct sesame_crypto_api {
    unsigned char *(*SHA256)(const unsigned char *d, size_t n, unsigned char *md);
    unsigned char *(*HMAC)(const EVP_MD *evp_md, const void *key, int key_len, const unsigned char *data, size_t data_len, unsigned char *md, unsigned int *md_len);
    const EVP_MD *(*EVP_sha256)(void);
    int (*RAND_bytes)(unsigned char *buf, int num);
    unsigned long (*ERR_get_error)(void);
    void (*ERR_error_string_n)(unsigned long e, char *buf, size_t len);
    void (*EVP_PKEY_free)(EVP_PKEY *pkey);
    OSSL_PARAM *(*OSSL_PARAM_BLD_to_param)(OSSL_PARAM_BLD *bld);
    EVP_PKEY_CTX *(*EVP_PKEY_CTX_new_from_name)(OSSL_LIB_CTX *libctx, const char *name, const char *propquery);
    int (*EVP_PKEY_fromdata_init)(EVP_PKEY_CTX *ctx);
    int (*EVP_PKEY_fromdata)(EVP_PKEY_CTX *ctx, EVP_PKEY **ppkey, int selection, OSSL_PARAM *param);
    void (*EVP_PKEY_CTX_free)(EVP_PKEY_CTX *ctx);
    void (*OSSL_PARAM_free)(OSSL_PARAM *p);
    BIGNUM *(*BN_bin2bn)(const unsigned char *s, int len, BIGNUM *ret);
    OSSL_PARAM_BLD *(*OSSL_PARAM_BLD_new)(void);
    int (*OSSL_PARAM_BLD_push_BN)(OSSL_PARAM_BLD *bld, const char *key, const BIGNUM *bn);
    void (*OSSL_PARAM_BLD_free)(OSSL_PARAM_BLD *bld);
    void (*BN_free)(BIGNUM *a);
    int (*OSSL_PARAM_BLD_push_utf8_string)(OSSL_PARAM_BLD *bld, const char *key, const char *buf, size_t bsize);
    int (*OSSL_PARAM_BLD_push_octet_string)(OSSL_PARAM_BLD *bld, const char *key, const void *buf, size_t bsize);
    EVP_MD_CTX *(*EVP_MD_CTX_new)(void);
    void (*EVP_MD_CTX_free)(EVP_MD_CTX *ctx);
    int (*EVP_DigestVerifyInit)(EVP_MD_CTX *ctx, EVP_PKEY_CTX **pctx, const EVP_MD *type, ENGINE *e, EVP_PKEY *pkey);
    int (*EVP_DigestVerify)(EVP_MD_CTX *ctx, const unsigned char *sigret, size_t siglen, const unsigned char *tbs, size_t tbslen);
    int (*EVP_PKEY_get_octet_string_param)(const EVP_PKEY *pkey, const char *key_name, unsigned char *buf, size_t max_buf_sz, size_t *out_sz);
    int (*EVP_PKEY_get_bn_param)(const EVP_PKEY *pkey, const char *key_name, BIGNUM **bn);
    int (*BN_num_bits)(const BIGNUM *a);
    int (*BN_bn2bin)(const BIGNUM *a, unsigned char *to);
    int (*EVP_DigestSignInit)(EVP_MD_CTX *ctx, EVP_PKEY_CTX **pctx, const EVP_MD *type, ENGINE *e, EVP_PKEY *pkey);
    int (*EVP_DigestSign)(EVP_MD_CTX *ctx, unsigned char *sigret, size_t *siglen, const unsigned char *tbs, size_t tbslen);
    ECDSA_SIG *(*ECDSA_SIG_new)(void);
    void (*ECDSA_SIG_free)(ECDSA_SIG *sig);
    int (*ECDSA_SIG_set0)(ECDSA_SIG *sig, BIGNUM *r, BIGNUM *s);
    int (*i2d_ECDSA_SIG)(const ECDSA_SIG *a, unsigned char **out);
    ECDSA_SIG *(*d2i_ECDSA_SIG)(ECDSA_SIG **a, const unsigned char **in, long len);
    int (*BN_bn2binpad)(const BIGNUM *a, unsigned char *to, int tolen);
    const BIGNUM *(*ECDSA_SIG_get0_r)(const ECDSA_SIG *sig);
    const BIGNUM *(*ECDSA_SIG_get0_s)(const ECDSA_SIG *sig);
    EVP_PKEY *(*EVP_PKEY_Q_keygen)(OSSL_LIB_CTX *libctx, const char *propq, const char *type, ...);
    EVP_CIPHER_CTX *(*EVP_CIPHER_CTX_new)(void);
    void (*EVP_CIPHER_CTX_free)(EVP_CIPHER_CTX *ctx);
    const EVP_CIPHER *(*EVP_aes_256_gcm)(void);
    int (*EVP_EncryptInit_ex)(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *type, ENGINE *impl, const unsigned char *key, const unsigned char *iv);
    int (*EVP_EncryptUpdate)(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl, const unsigned char *in, int inl);
    int (*EVP_EncryptFinal_ex)(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl);
    int (*EVP_DecryptInit_ex)(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *type, ENGINE *impl, const unsigned char *key, const unsigned char *iv);
    int (*EVP_DecryptUpdate)(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl, const unsigned char *in, int inl);
    int (*EVP_DecryptFinal_ex)(EVP_CIPHER_CTX *ctx, unsigned char *outm, int *outl);
    int (*EVP_CIPHER_CTX_ctrl)(EVP_CIPHER_CTX *ctx, int type, int arg, void *ptr);
    BIO *(*BIO_new_mem_buf)(const void *buf, int len);
    BIO *(*BIO_new)(const BIO_METHOD *type);
    const BIO_METHOD *(*BIO_s_mem)(void);
    long (*BIO_ctrl)(BIO *bp, int cmd, long larg, void *parg);
    int (*BIO_free)(BIO *a);
    EVP_PKEY *(*PEM_read_bio_PrivateKey)(BIO *bp, EVP_PKEY **x, pem_password_cb *cb, void *u);
    int (*PEM_write_bio_PrivateKey)(BIO *bp, const EVP_PKEY *x, const EVP_CIPHER *enc, const unsigned char *kstr,
                                    int klen, pem_password_cb *cb, void *u);
    int (*EVP_PKEY_is_a)(const EVP_PKEY *pkey, const char *name);
    int (*EVP_PKEY_get_bits)(const EVP_PKEY *pkey);
    int (*EVP_PKEY_get_utf8_string_param)(const EVP_PKEY *pkey, const char *key_name, char *str, size_t max_buf_sz,
                                          size_t *out_sz);
} sesame_crypto_api;

static inline sesame_crypto_api *sesame_crypto_storage(void) {
    static sesame_crypto_api api;
    return &api;
}

/// Stops the process with `reason` on standard error. A libcrypto that cannot be opened is a
/// broken installation, not bad input: linked, the same library missing would have kept the
/// program from starting at all, and no hash or signature can be made without it.
static inline void sesame_crypto_unavailable(const char *reason, const char *detail) {
    fprintf(stderr, "sesame: %s (%s); install OpenSSL 3's libcrypto (Debian and Ubuntu: apt install libssl3)\n",
            reason, detail != NULL ? detail : "no detail");
    abort();
}

static inline void sesame_crypto_load(void) {
    sesame_crypto_api *api = sesame_crypto_storage();
    // The soname of OpenSSL 3, whose EVP_PKEY_fromdata and OSSL_PARAM_BLD Sesame uses.
    void *library = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) sesame_crypto_unavailable("libcrypto.so.3 could not be loaded", dlerror());
#define SESAME_CRYPTO_RESOLVE(name)                                                                             \
    do {                                                                                                        \
        *(void **)(&api->name) = dlsym(library, #name);                                                         \
        if (api->name == NULL) sesame_crypto_unavailable("the libcrypto.so.3 found lacks " #name, NULL);        \
    } while (0)
    SESAME_CRYPTO_RESOLVE(SHA256);
    SESAME_CRYPTO_RESOLVE(HMAC);
    SESAME_CRYPTO_RESOLVE(EVP_sha256);
    SESAME_CRYPTO_RESOLVE(RAND_bytes);
    SESAME_CRYPTO_RESOLVE(ERR_get_error);
    SESAME_CRYPTO_RESOLVE(ERR_error_string_n);
    SESAME_CRYPTO_RESOLVE(EVP_PKEY_free);
    SESAME_CRYPTO_RESOLVE(OSSL_PARAM_BLD_to_param);
    SESAME_CRYPTO_RESOLVE(EVP_PKEY_CTX_new_from_name);
    SESAME_CRYPTO_RESOLVE(EVP_PKEY_fromdata_init);
    SESAME_CRYPTO_RESOLVE(EVP_PKEY_fromdata);
    SESAME_CRYPTO_RESOLVE(EVP_PKEY_CTX_free);
    SESAME_CRYPTO_RESOLVE(OSSL_PARAM_free);
    SESAME_CRYPTO_RESOLVE(BN_bin2bn);
    SESAME_CRYPTO_RESOLVE(OSSL_PARAM_BLD_new);
    SESAME_CRYPTO_RESOLVE(OSSL_PARAM_BLD_push_BN);
    SESAME_CRYPTO_RESOLVE(OSSL_PARAM_BLD_free);
    SESAME_CRYPTO_RESOLVE(BN_free);
    SESAME_CRYPTO_RESOLVE(OSSL_PARAM_BLD_push_utf8_string);
    SESAME_CRYPTO_RESOLVE(OSSL_PARAM_BLD_push_octet_string);
    SESAME_CRYPTO_RESOLVE(EVP_MD_CTX_new);
    SESAME_CRYPTO_RESOLVE(EVP_MD_CTX_free);
    SESAME_CRYPTO_RESOLVE(EVP_DigestVerifyInit);
    SESAME_CRYPTO_RESOLVE(EVP_DigestVerify);
    SESAME_CRYPTO_RESOLVE(EVP_PKEY_get_octet_string_param);
    SESAME_CRYPTO_RESOLVE(EVP_PKEY_get_bn_param);
    SESAME_CRYPTO_RESOLVE(BN_num_bits);
    SESAME_CRYPTO_RESOLVE(BN_bn2bin);
    SESAME_CRYPTO_RESOLVE(EVP_DigestSignInit);
    SESAME_CRYPTO_RESOLVE(EVP_DigestSign);
    SESAME_CRYPTO_RESOLVE(ECDSA_SIG_new);
    SESAME_CRYPTO_RESOLVE(ECDSA_SIG_free);
    SESAME_CRYPTO_RESOLVE(ECDSA_SIG_set0);
    SESAME_CRYPTO_RESOLVE(i2d_ECDSA_SIG);
    SESAME_CRYPTO_RESOLVE(d2i_ECDSA_SIG);
    SESAME_CRYPTO_RESOLVE(BN_bn2binpad);
    SESAME_CRYPTO_RESOLVE(ECDSA_SIG_get0_r);
    SESAME_CRYPTO_RESOLVE(ECDSA_SIG_get0_s);
    SESAME_CRYPTO_RESOLVE(EVP_PKEY_Q_keygen);
    SESAME_CRYPTO_RESOLVE(EVP_CIPHER_CTX_new);
    SESAME_CRYPTO_RESOLVE(EVP_CIPHER_CTX_free);
    SESAME_CRYPTO_RESOLVE(EVP_aes_256_gcm);
    SESAME_CRYPTO_RESOLVE(EVP_EncryptInit_ex);
    SESAME_CRYPTO_RESOLVE(EVP_EncryptUpdate);
    SESAME_CRYPTO_RESOLVE(EVP_EncryptFinal_ex);
    SESAME_CRYPTO_RESOLVE(EVP_DecryptInit_ex);
    SESAME_CRYPTO_RESOLVE(EVP_DecryptUpdate);
    SESAME_CRYPTO_RESOLVE(EVP_DecryptFinal_ex);
    SESAME_CRYPTO_RESOLVE(EVP_CIPHER_CTX_ctrl);
    SESAME_CRYPTO_RESOLVE(BIO_new_mem_buf);
    SESAME_CRYPTO_RESOLVE(BIO_new);
    SESAME_CRYPTO_RESOLVE(BIO_s_mem);
    SESAME_CRYPTO_RESOLVE(BIO_ctrl);
    SESAME_CRYPTO_RESOLVE(BIO_free);
    SESAME_CRYPTO_RESOLVE(PEM_read_bio_PrivateKey);
    SESAME_CRYPTO_RESOLVE(PEM_write_bio_PrivateKey);
    SESAME_CRYPTO_RESOLVE(EVP_PKEY_is_a);
    SESAME_CRYPTO_RESOLVE(EVP_PKEY_get_bits);
    SESAME_CRYPTO_RESOLVE(EVP_PKEY_get_utf8_string_param);
#undef SESAME_CRYPTO_RESOLVE
}

/// libcrypto, loaded on the first call.
static inline const sesame_crypto_api *sesame_crypto(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, sesame_crypto_load);
    return sesame_crypto_storage();
}

// MARK: libcrypto's functions, under sesame_ names

static inline unsigned char *sesame_SHA256(const unsigned char *d, size_t n, unsigned char *md) { return sesame_crypto()->SHA256(d, n, md); }
static inline unsigned char *sesame_HMAC(const EVP_MD *evp_md, const void *key, int key_len, const unsigned char *data, size_t data_len, unsigned char *md, unsigned int *md_len) { return sesame_crypto()->HMAC(evp_md, key, key_len, data, data_len, md, md_len); }
static inline const EVP_MD *sesame_EVP_sha256(void) { return sesame_crypto()->EVP_sha256(); }
static inline int sesame_RAND_bytes(unsigned char *buf, int num) { return sesame_crypto()->RAND_bytes(buf, num); }
static inline unsigned long sesame_ERR_get_error(void) { return sesame_crypto()->ERR_get_error(); }
static inline void sesame_ERR_error_string_n(unsigned long e, char *buf, size_t len) { sesame_crypto()->ERR_error_string_n(e, buf, len); }
static inline void sesame_EVP_PKEY_free(EVP_PKEY *pkey) { sesame_crypto()->EVP_PKEY_free(pkey); }
static inline OSSL_PARAM *sesame_OSSL_PARAM_BLD_to_param(OSSL_PARAM_BLD *bld) { return sesame_crypto()->OSSL_PARAM_BLD_to_param(bld); }
static inline EVP_PKEY_CTX *sesame_EVP_PKEY_CTX_new_from_name(OSSL_LIB_CTX *libctx, const char *name, const char *propquery) { return sesame_crypto()->EVP_PKEY_CTX_new_from_name(libctx, name, propquery); }
static inline int sesame_EVP_PKEY_fromdata_init(EVP_PKEY_CTX *ctx) { return sesame_crypto()->EVP_PKEY_fromdata_init(ctx); }
static inline int sesame_EVP_PKEY_fromdata(EVP_PKEY_CTX *ctx, EVP_PKEY **ppkey, int selection, OSSL_PARAM *param) { return sesame_crypto()->EVP_PKEY_fromdata(ctx, ppkey, selection, param); }
static inline void sesame_EVP_PKEY_CTX_free(EVP_PKEY_CTX *ctx) { sesame_crypto()->EVP_PKEY_CTX_free(ctx); }
static inline void sesame_OSSL_PARAM_free(OSSL_PARAM *p) { sesame_crypto()->OSSL_PARAM_free(p); }
static inline BIGNUM *sesame_BN_bin2bn(const unsigned char *s, int len, BIGNUM *ret) { return sesame_crypto()->BN_bin2bn(s, len, ret); }
static inline OSSL_PARAM_BLD *sesame_OSSL_PARAM_BLD_new(void) { return sesame_crypto()->OSSL_PARAM_BLD_new(); }
static inline int sesame_OSSL_PARAM_BLD_push_BN(OSSL_PARAM_BLD *bld, const char *key, const BIGNUM *bn) { return sesame_crypto()->OSSL_PARAM_BLD_push_BN(bld, key, bn); }
static inline void sesame_OSSL_PARAM_BLD_free(OSSL_PARAM_BLD *bld) { sesame_crypto()->OSSL_PARAM_BLD_free(bld); }
static inline void sesame_BN_free(BIGNUM *a) { sesame_crypto()->BN_free(a); }
static inline int sesame_OSSL_PARAM_BLD_push_utf8_string(OSSL_PARAM_BLD *bld, const char *key, const char *buf, size_t bsize) { return sesame_crypto()->OSSL_PARAM_BLD_push_utf8_string(bld, key, buf, bsize); }
static inline int sesame_OSSL_PARAM_BLD_push_octet_string(OSSL_PARAM_BLD *bld, const char *key, const void *buf, size_t bsize) { return sesame_crypto()->OSSL_PARAM_BLD_push_octet_string(bld, key, buf, bsize); }
static inline EVP_MD_CTX *sesame_EVP_MD_CTX_new(void) { return sesame_crypto()->EVP_MD_CTX_new(); }
static inline void sesame_EVP_MD_CTX_free(EVP_MD_CTX *ctx) { sesame_crypto()->EVP_MD_CTX_free(ctx); }
static inline int sesame_EVP_DigestVerifyInit(EVP_MD_CTX *ctx, EVP_PKEY_CTX **pctx, const EVP_MD *type, ENGINE *e, EVP_PKEY *pkey) { return sesame_crypto()->EVP_DigestVerifyInit(ctx, pctx, type, e, pkey); }
static inline int sesame_EVP_DigestVerify(EVP_MD_CTX *ctx, const unsigned char *sigret, size_t siglen, const unsigned char *tbs, size_t tbslen) { return sesame_crypto()->EVP_DigestVerify(ctx, sigret, siglen, tbs, tbslen); }
static inline int sesame_EVP_PKEY_get_octet_string_param(const EVP_PKEY *pkey, const char *key_name, unsigned char *buf, size_t max_buf_sz, size_t *out_sz) { return sesame_crypto()->EVP_PKEY_get_octet_string_param(pkey, key_name, buf, max_buf_sz, out_sz); }
static inline int sesame_EVP_PKEY_get_bn_param(const EVP_PKEY *pkey, const char *key_name, BIGNUM **bn) { return sesame_crypto()->EVP_PKEY_get_bn_param(pkey, key_name, bn); }
static inline int sesame_BN_num_bits(const BIGNUM *a) { return sesame_crypto()->BN_num_bits(a); }
static inline int sesame_BN_bn2bin(const BIGNUM *a, unsigned char *to) { return sesame_crypto()->BN_bn2bin(a, to); }
static inline int sesame_EVP_DigestSignInit(EVP_MD_CTX *ctx, EVP_PKEY_CTX **pctx, const EVP_MD *type, ENGINE *e, EVP_PKEY *pkey) { return sesame_crypto()->EVP_DigestSignInit(ctx, pctx, type, e, pkey); }
static inline int sesame_EVP_DigestSign(EVP_MD_CTX *ctx, unsigned char *sigret, size_t *siglen, const unsigned char *tbs, size_t tbslen) { return sesame_crypto()->EVP_DigestSign(ctx, sigret, siglen, tbs, tbslen); }
static inline ECDSA_SIG *sesame_ECDSA_SIG_new(void) { return sesame_crypto()->ECDSA_SIG_new(); }
static inline void sesame_ECDSA_SIG_free(ECDSA_SIG *sig) { sesame_crypto()->ECDSA_SIG_free(sig); }
static inline int sesame_ECDSA_SIG_set0(ECDSA_SIG *sig, BIGNUM *r, BIGNUM *s) { return sesame_crypto()->ECDSA_SIG_set0(sig, r, s); }
static inline int sesame_i2d_ECDSA_SIG(const ECDSA_SIG *a, unsigned char **out) { return sesame_crypto()->i2d_ECDSA_SIG(a, out); }
static inline ECDSA_SIG *sesame_d2i_ECDSA_SIG(ECDSA_SIG **a, const unsigned char **in, long len) { return sesame_crypto()->d2i_ECDSA_SIG(a, in, len); }
static inline int sesame_BN_bn2binpad(const BIGNUM *a, unsigned char *to, int tolen) { return sesame_crypto()->BN_bn2binpad(a, to, tolen); }
static inline const BIGNUM *sesame_ECDSA_SIG_get0_r(const ECDSA_SIG *sig) { return sesame_crypto()->ECDSA_SIG_get0_r(sig); }
static inline const BIGNUM *sesame_ECDSA_SIG_get0_s(const ECDSA_SIG *sig) { return sesame_crypto()->ECDSA_SIG_get0_s(sig); }

// MARK: AES-256-GCM (SesamePostgres's encryption at rest)

/// Seals `plaintext` with AES-256-GCM under the 32-byte `key` and the 12-byte `iv`, binding `aad`
/// (which may be empty): writes `plaintext_length` bytes of ciphertext to `ciphertext` and the
/// 16-byte tag to `tag`. Returns 1 on success, 0 on any failure.
///
/// One C function for the whole sequence of EVP calls, so that the context is always freed and
/// Swift handles no EVP_CIPHER_CTX.
static inline int sesame_aes_256_gcm_seal(const unsigned char *key, const unsigned char *iv, const unsigned char *aad,
                                          int aad_length, const unsigned char *plaintext, int plaintext_length,
                                          unsigned char *ciphertext, unsigned char *tag) {
    const sesame_crypto_api *api = sesame_crypto();
    EVP_CIPHER_CTX *context = api->EVP_CIPHER_CTX_new();
    if (context == NULL) return 0;
    int length = 0, ok = 0;
    if (api->EVP_EncryptInit_ex(context, api->EVP_aes_256_gcm(), NULL, NULL, NULL) == 1
        && api->EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) == 1
        && api->EVP_EncryptInit_ex(context, NULL, NULL, key, iv) == 1
        && (aad_length == 0 || api->EVP_EncryptUpdate(context, NULL, &length, aad, aad_length) == 1)
        && (plaintext_length == 0
            || api->EVP_EncryptUpdate(context, ciphertext, &length, plaintext, plaintext_length) == 1)
        && api->EVP_EncryptFinal_ex(context, ciphertext + (plaintext_length == 0 ? 0 : length), &length) == 1
        && api->EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1) {
        ok = 1;
    }
    api->EVP_CIPHER_CTX_free(context);
    return ok;
}

/// Opens what sesame_aes_256_gcm_seal sealed: checks the 16-byte `tag` over `ciphertext` and
/// `aad` under `key` and `iv`, and writes `ciphertext_length` bytes of plaintext. Returns 1 when
/// the tag matched, 0 when it did not (a wrong key, other associated data, altered bytes) or on
/// any failure; the plaintext written is then not to be used.
static inline int sesame_aes_256_gcm_open(const unsigned char *key, const unsigned char *iv, const unsigned char *aad,
                                          int aad_length, const unsigned char *ciphertext, int ciphertext_length,
                                          const unsigned char *tag, unsigned char *plaintext) {
    const sesame_crypto_api *api = sesame_crypto();
    EVP_CIPHER_CTX *context = api->EVP_CIPHER_CTX_new();
    if (context == NULL) return 0;
    int length = 0, ok = 0;
    if (api->EVP_DecryptInit_ex(context, api->EVP_aes_256_gcm(), NULL, NULL, NULL) == 1
        && api->EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) == 1
        && api->EVP_DecryptInit_ex(context, NULL, NULL, key, iv) == 1
        && (aad_length == 0 || api->EVP_DecryptUpdate(context, NULL, &length, aad, aad_length) == 1)
        && (ciphertext_length == 0
            || api->EVP_DecryptUpdate(context, plaintext, &length, ciphertext, ciphertext_length) == 1)
        && api->EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, (void *)tag) == 1
        && api->EVP_DecryptFinal_ex(context, plaintext + (ciphertext_length == 0 ? 0 : length), &length) == 1) {
        ok = 1;
    }
    api->EVP_CIPHER_CTX_free(context);
    return ok;
}

// MARK: Helpers

/// A new RSA key pair of `bits` bits (EVP_RSA_gen is a macro over the variadic EVP_PKEY_Q_keygen).
static inline EVP_PKEY *sesame_rsa_generate(unsigned int bits) {
    return sesame_crypto()->EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)bits);
}

/// A new EC key pair on the P-256 curve (EVP_EC_gen is a macro over the variadic EVP_PKEY_Q_keygen).
static inline EVP_PKEY *sesame_p256_generate(void) {
    return sesame_crypto()->EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}

/// Refuses every passphrase request: an encrypted private key fails to load rather than
/// libcrypto asking on the terminal.
static inline int sesame_no_passphrase(char *buf, int size, int rwflag, void *u) {
    (void)buf, (void)size, (void)rwflag, (void)u;
    return -1;
}

/// A private key from PEM text (PKCS#8, or the traditional RSA and EC forms); NULL when the text
/// is not an unencrypted PEM private key.
static inline EVP_PKEY *sesame_private_key_from_pem(const char *pem, int length) {
    const sesame_crypto_api *api = sesame_crypto();
    BIO *bio = api->BIO_new_mem_buf(pem, length);
    if (bio == NULL) return NULL;
    EVP_PKEY *key = api->PEM_read_bio_PrivateKey(bio, NULL, sesame_no_passphrase, NULL);
    api->BIO_free(bio);
    return key;
}

/// The key as unencrypted PKCS#8 PEM text, in a buffer of `*length` bytes the caller frees with
/// free(); NULL on failure.
static inline char *sesame_private_key_to_pem(const EVP_PKEY *key, size_t *length) {
    const sesame_crypto_api *api = sesame_crypto();
    BIO *bio = api->BIO_new(api->BIO_s_mem());
    if (bio == NULL) return NULL;
    char *copy = NULL;
    if (api->PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1) {
        char *data = NULL;
        long count = api->BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data);
        if (count > 0 && data != NULL && (copy = malloc((size_t)count)) != NULL) {
            memcpy(copy, data, (size_t)count);
            *length = (size_t)count;
        }
    }
    api->BIO_free(bio);
    return copy;
}

/// What a private key can sign JWS with: 1 for RS256 (RSA of 2048 bits or more), 2 for ES256
/// (EC on P-256), -1 for RSA shorter than 2048 bits, 0 for anything else.
static inline int sesame_private_key_kind(const EVP_PKEY *key) {
    const sesame_crypto_api *api = sesame_crypto();
    if (api->EVP_PKEY_is_a(key, "RSA") == 1) return api->EVP_PKEY_get_bits(key) >= 2048 ? 1 : -1;
    if (api->EVP_PKEY_is_a(key, "EC") == 1) {
        char group[64] = {0};
        size_t length = 0;
        if (api->EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &length) == 1
            && (strcmp(group, "prime256v1") == 0 || strcmp(group, "P-256") == 0)) {
            return 2;
        }
    }
    return 0;
}

/// A public key of `type` ("RSA" or "EC") from parameters built by `push`-style calls.
///
/// Kept in C because OSSL_PARAM_BLD stores the key names and octet buffers by pointer until
/// OSSL_PARAM_BLD_to_param, which Swift's temporary pointers do not outlive.
static inline EVP_PKEY *sesame_public_key_from_params(const char *type, OSSL_PARAM_BLD *builder) {
    EVP_PKEY *key = NULL;
    OSSL_PARAM *params = sesame_crypto()->OSSL_PARAM_BLD_to_param(builder);
    EVP_PKEY_CTX *context = sesame_crypto()->EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (params != NULL && context != NULL && sesame_crypto()->EVP_PKEY_fromdata_init(context) == 1) {
        if (sesame_crypto()->EVP_PKEY_fromdata(context, &key, EVP_PKEY_PUBLIC_KEY, params) != 1) key = NULL;
    }
    sesame_crypto()->EVP_PKEY_CTX_free(context);
    sesame_crypto()->OSSL_PARAM_free(params);
    return key;
}

/// An RSA public key from its big-endian modulus and exponent.
static inline EVP_PKEY *sesame_rsa_public_key(const unsigned char *n, size_t n_length, const unsigned char *e,
                                              size_t e_length) {
    EVP_PKEY *key = NULL;
    BIGNUM *bn_n = sesame_crypto()->BN_bin2bn(n, (int)n_length, NULL);
    BIGNUM *bn_e = sesame_crypto()->BN_bin2bn(e, (int)e_length, NULL);
    OSSL_PARAM_BLD *builder = sesame_crypto()->OSSL_PARAM_BLD_new();
    if (bn_n != NULL && bn_e != NULL && builder != NULL
        && sesame_crypto()->OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_N, bn_n) == 1
        && sesame_crypto()->OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_E, bn_e) == 1) {
        key = sesame_public_key_from_params("RSA", builder);
    }
    sesame_crypto()->OSSL_PARAM_BLD_free(builder);
    sesame_crypto()->BN_free(bn_n);
    sesame_crypto()->BN_free(bn_e);
    return key;
}

/// An EC public key on P-256 from its uncompressed point (0x04 || x || y, 65 bytes).
static inline EVP_PKEY *sesame_p256_public_key(const unsigned char *point, size_t length) {
    EVP_PKEY *key = NULL;
    OSSL_PARAM_BLD *builder = sesame_crypto()->OSSL_PARAM_BLD_new();
    if (builder != NULL
        && sesame_crypto()->OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1
        && sesame_crypto()->OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, point, length) == 1) {
        key = sesame_public_key_from_params("EC", builder);
    }
    sesame_crypto()->OSSL_PARAM_BLD_free(builder);
    return key;
}

#endif
