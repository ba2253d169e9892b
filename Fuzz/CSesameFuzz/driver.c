#include "CSesameFuzz.h"

// Weak: resolved when libFuzzer is linked in (scripts/fuzz), null otherwise.
extern int LLVMFuzzerRunDriver(int *argc, char ***argv, sesame_fuzz_callback callback) __attribute__((weak));

int sesame_fuzz_run_driver(int *argc, char ***argv, sesame_fuzz_callback callback) {
    if (LLVMFuzzerRunDriver == NULL) {
        return -1;
    }
    return LLVMFuzzerRunDriver(argc, argv, callback);
}
