#ifndef SESAME_FUZZ_H
#define SESAME_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/// What libFuzzer calls with each input.
typedef int (*sesame_fuzz_callback)(const uint8_t *data, size_t size);

/// Hands the process to libFuzzer's driver (LLVMFuzzerRunDriver) when the program was linked
/// with libFuzzer (scripts/fuzz), and returns its exit status; returns -1 at once when it was
/// not, so the same program replays inputs in an ordinary build.
int sesame_fuzz_run_driver(int *argc, char ***argv, sesame_fuzz_callback callback);

#endif
