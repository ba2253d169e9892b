#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "CSesameSystem.h"

/// In the child: makes `source` the descriptor `target` (kept open across exec).
/// A negative `source` leaves `target` as inherited. Returns 0 or an errno value.
static int sesame_place(int source, int target) {
    if (source < 0) return 0;
    if (source == target) {
        int flags = fcntl(target, F_GETFD);
        if (flags < 0 || fcntl(target, F_SETFD, flags & ~FD_CLOEXEC) < 0) return errno;
        return 0;
    }
    while (dup2(source, target) < 0) {
        if (errno != EINTR) return errno;
    }
    return 0;
}

/// Reports `error` through the status pipe and ends the child without running atexit handlers.
static void sesame_child_fail(int report, int error) {
    while (write(report, &error, sizeof error) < 0 && errno == EINTR) {}
    _exit(127);
}

int sesame_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], int input, int output,
                 int error, int die_with_parent) {
    // The child reports a failure before exec through this pipe; exec closes it (CLOEXEC), so
    // end of file on it means the program is running.
    int report[2];
    if (pipe2(report, O_CLOEXEC) < 0) return errno;
    // Descriptors 0-2 of the child are placed one after the other; a source that is itself one of
    // the lower targets would be overwritten first, so move such sources out of the way.
    int sources[3] = {input, output, error};
    int moved[3] = {-1, -1, -1};
    for (int index = 0; index < 3; index++) {
        if (sources[index] >= 0 && sources[index] < 3 && sources[index] != index) {
            moved[index] = fcntl(sources[index], F_DUPFD_CLOEXEC, 3);
            if (moved[index] < 0) {
                int saved = errno;
                for (int other = 0; other < index; other++)
                    if (moved[other] >= 0) close(moved[other]);
                close(report[0]);
                close(report[1]);
                return saved;
            }
            sources[index] = moved[index];
        }
    }
    // vfork, as glibc's posix_spawn does (clone with CLONE_VM | CLONE_VFORK): no copy of this
    // (large, many-threaded) process's page tables, and this thread waits until the child has
    // called execve, so the child holds copies of this process's descriptors (sockets in other
    // threads' epoll sets among them) only for the few calls below. The child touches nothing
    // but its own stack frame and makes only system calls; every signal is blocked around the
    // vfork, and the child sets every caught signal to its default action before unblocking,
    // so no handler of this process ever runs in the child.
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pid_t parent = getpid();
    pid_t child = vfork();
    if (child == 0) {
        for (int number = 1; number < NSIG; number++) {
            struct sigaction action;
            if (sigaction(number, NULL, &action) != 0) continue;  // SIGKILL, SIGSTOP, glibc's own
            int caught = action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN;
            int reset = number == SIGPIPE || number == SIGTERM || number == SIGINT || number == SIGHUP
                        || number == SIGQUIT || number == SIGCHLD || number == SIGUSR1 || number == SIGUSR2;
            if (caught || (reset && action.sa_handler == SIG_IGN)) {
                struct sigaction fallback;
                memset(&fallback, 0, sizeof fallback);
                fallback.sa_handler = SIG_DFL;
                sigaction(number, &fallback, NULL);
            }
        }
        if (die_with_parent) {
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) sesame_child_fail(report[1], errno);
            // The parent may have died between vfork and prctl: then nothing would ever signal.
            if (getppid() != parent) _exit(127);
        }
        for (int target = 0; target < 3; target++) {
            int failure = sesame_place(sources[target], target);
            if (failure != 0) sesame_child_fail(report[1], failure);
        }
        // Nothing else of the parent leaks into the child: no sockets, no other children's pipes.
        if (report[1] > 3) syscall(SYS_close_range, 3U, (unsigned)report[1] - 1, 0U);
        syscall(SYS_close_range, (unsigned)report[1] + 1, ~0U, 0U);
        // Nothing blocked in the program (this thread's mask, which vfork copied, blocks all).
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(path, argv, envp);
        sesame_child_fail(report[1], errno);
    }
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    for (int index = 0; index < 3; index++)
        if (moved[index] >= 0) close(moved[index]);
    close(report[1]);
    if (child < 0) {
        close(report[0]);
        return saved;
    }
    int failure = 0;
    ssize_t count;
    do {
        count = read(report[0], &failure, sizeof failure);
    } while (count < 0 && errno == EINTR);
    close(report[0]);
    if (count == (ssize_t)sizeof failure) {
        // The child never ran the program: reap it here, so the caller never sees its pid.
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
        return failure != 0 ? failure : ENOEXEC;
    }
    *pid = child;
    return 0;
}
