#ifndef SESAME_CCRYPTO_SHIM_H
#define SESAME_CCRYPTO_SHIM_H

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/err.h>
#include <openssl/crypto.h>

#endif
