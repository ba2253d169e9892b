#ifndef SESAME_CSESAMESYSTEM_H
#define SESAME_CSESAMESYSTEM_H

#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

/// Starts `path` with `argv` and `envp` in a child process whose standard input, output and
/// error are `input`, `output` and `error` (a negative descriptor: inherited), with every other
/// descriptor closed, no signal blocked, every signal this process catches at its default action,
/// and SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1 and SIGUSR2 at their default
/// actions even when this process ignores them. The child is made with vfork, as posix_spawn does.
///
/// When `die_with_parent` is non-zero, the child gets SIGKILL when the *thread* that called this
/// ends (PR_SET_PDEATHSIG), and so also when this process ends in any way, even SIGKILL: call it
/// from a thread that lives as long as the child.
///
/// Returns 0 and sets `*pid`, or an errno value (the program could not be started; no child is
/// left behind).
int sesame_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], int input, int output,
                 int error, int die_with_parent);

/// poll(2) with a timeout of `nanoseconds` (≥ 0; ppoll, which glibc declares only under
/// _GNU_SOURCE). Returns what ppoll returns.
int sesame_poll_nanoseconds(struct pollfd *fds, nfds_t count, long long nanoseconds);

/// Frees this thread's OpenSSL state (OPENSSL_thread_stop) when libcrypto is in the process;
/// does nothing otherwise, without loading libcrypto or looking for its file (the loader's list
/// of objects is read, not dlopen). For a thread about to end: OpenSSL would free that state in
/// the thread's exit, and a process that exits meanwhile has LeakSanitizer find it attached to
/// no thread it knows (a report of 904 bytes, OpenSSL 3's per-thread error queue).
void sesame_openssl_thread_stop_if_loaded(void);

/// Catches signal `number` (1...64) by writing one byte to `descriptor` (the write end of a pipe)
/// each time it arrives, from the handler, so that a thread polling the read end wakes: installed
/// when this returns, unlike a dispatch source. The action it replaces is stored in `*previous`.
/// Returns 0 or an errno value.
int sesame_signal_to_descriptor(int number, int descriptor, struct sigaction *previous);

/// Puts back the action ``sesame_signal_to_descriptor`` replaced, and stops writing to its
/// descriptor. Returns 0 or an errno value.
int sesame_signal_restore(int number, const struct sigaction *previous);

#endif
