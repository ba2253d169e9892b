#ifndef SESAME_CMICROHTTPD_SHIM_H
#define SESAME_CMICROHTTPD_SHIM_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <unistd.h>
#include <dlfcn.h>
#include <pthread.h>
#include <poll.h>
#include <errno.h>
#include <microhttpd.h>

// libmicrohttpd is loaded when a server first starts (dlopen), not when the program starts: it
// brings GnuTLS and its libraries, whose constructors cost every process about 2 ms of CPU, and
// most `sesame` commands (`token`, `--help`) start no server. Swift calls the `sesame_mhd_*`
// functions below instead of libmicrohttpd's own names; `sesame_mhd_failure` says, before the
// first server starts, whether the library could be loaded.

typedef struct sesame_mhd_api {
    /// NULL once everything is resolved; otherwise why libmicrohttpd cannot be used.
    const char *failure;
    struct MHD_Daemon *(*start_daemon)(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc, void *apc_cls,
                                       MHD_AccessHandlerCallback dh, void *dh_cls, ...);
    void (*stop_daemon)(struct MHD_Daemon *daemon);
    MHD_socket (*quiesce_daemon)(struct MHD_Daemon *daemon);
    enum MHD_Result (*add_connection)(struct MHD_Daemon *daemon, MHD_socket client_socket,
                                      const struct sockaddr *addr, socklen_t addrlen);
    const union MHD_DaemonInfo *(*get_daemon_info)(struct MHD_Daemon *daemon, enum MHD_DaemonInfoType info_type, ...);
    const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *connection,
                                                           enum MHD_ConnectionInfoType info_type, ...);
    int (*get_connection_values_n)(struct MHD_Connection *connection, enum MHD_ValueKind kind,
                                   MHD_KeyValueIteratorN iterator, void *iterator_cls);
    void (*suspend_connection)(struct MHD_Connection *connection);
    void (*resume_connection)(struct MHD_Connection *connection);
    struct MHD_Response *(*create_response_from_buffer)(size_t size, void *buffer, enum MHD_ResponseMemoryMode mode);
    void (*destroy_response)(struct MHD_Response *response);
    enum MHD_Result (*add_response_header)(struct MHD_Response *response, const char *header, const char *content);
    enum MHD_Result (*queue_response)(struct MHD_Connection *connection, unsigned int status_code,
                                      struct MHD_Response *response);
} sesame_mhd_api;

static inline sesame_mhd_api *sesame_mhd_storage(void) {
    static sesame_mhd_api api;
    return &api;
}

static inline void sesame_mhd_load(void) {
    sesame_mhd_api *api = sesame_mhd_storage();
    void *library = dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        api->failure = "libmicrohttpd.so.12 could not be loaded; install libmicrohttpd (Debian and Ubuntu: apt install "
                       "libmicrohttpd12)";
        return;
    }
    int missing = 0;
#define SESAME_MHD_RESOLVE(field, name)                                                                         \
    do {                                                                                                        \
        *(void **)(&api->field) = dlsym(library, name);                                                         \
        if (api->field == NULL) missing = 1;                                                                    \
    } while (0)
    SESAME_MHD_RESOLVE(start_daemon, "MHD_start_daemon");
    SESAME_MHD_RESOLVE(stop_daemon, "MHD_stop_daemon");
    SESAME_MHD_RESOLVE(quiesce_daemon, "MHD_quiesce_daemon");
    SESAME_MHD_RESOLVE(add_connection, "MHD_add_connection");
    SESAME_MHD_RESOLVE(get_daemon_info, "MHD_get_daemon_info");
    SESAME_MHD_RESOLVE(get_connection_info, "MHD_get_connection_info");
    SESAME_MHD_RESOLVE(get_connection_values_n, "MHD_get_connection_values_n");
    SESAME_MHD_RESOLVE(suspend_connection, "MHD_suspend_connection");
    SESAME_MHD_RESOLVE(resume_connection, "MHD_resume_connection");
    SESAME_MHD_RESOLVE(create_response_from_buffer, "MHD_create_response_from_buffer");
    SESAME_MHD_RESOLVE(destroy_response, "MHD_destroy_response");
    SESAME_MHD_RESOLVE(add_response_header, "MHD_add_response_header");
    SESAME_MHD_RESOLVE(queue_response, "MHD_queue_response");
#undef SESAME_MHD_RESOLVE
    if (missing) api->failure = "the libmicrohttpd.so.12 found lacks functions Sesame needs; install 0.9.75 or later";
}

/// libmicrohttpd, loaded on the first call.
static inline const sesame_mhd_api *sesame_mhd(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, sesame_mhd_load);
    return sesame_mhd_storage();
}

/// NULL when libmicrohttpd is loaded; otherwise why it cannot be used. Checked before a server
/// starts: the other functions here assume the library is there.
static inline const char *sesame_mhd_failure(void) { return sesame_mhd()->failure; }

static inline void sesame_mhd_stop_daemon(struct MHD_Daemon *daemon) { sesame_mhd()->stop_daemon(daemon); }
static inline MHD_socket sesame_mhd_quiesce_daemon(struct MHD_Daemon *daemon) {
    return sesame_mhd()->quiesce_daemon(daemon);
}
static inline int sesame_mhd_get_connection_values_n(struct MHD_Connection *connection, enum MHD_ValueKind kind,
                                                     MHD_KeyValueIteratorN iterator, void *iterator_cls) {
    return sesame_mhd()->get_connection_values_n(connection, kind, iterator, iterator_cls);
}
static inline void sesame_mhd_suspend_connection(struct MHD_Connection *connection) {
    sesame_mhd()->suspend_connection(connection);
}
static inline void sesame_mhd_resume_connection(struct MHD_Connection *connection) {
    sesame_mhd()->resume_connection(connection);
}
static inline struct MHD_Response *sesame_mhd_create_response_from_buffer(size_t size, void *buffer,
                                                                          enum MHD_ResponseMemoryMode mode) {
    return sesame_mhd()->create_response_from_buffer(size, buffer, mode);
}
static inline void sesame_mhd_destroy_response(struct MHD_Response *response) {
    sesame_mhd()->destroy_response(response);
}
static inline enum MHD_Result sesame_mhd_add_response_header(struct MHD_Response *response, const char *header,
                                                             const char *content) {
    return sesame_mhd()->add_response_header(response, header, content);
}
static inline enum MHD_Result sesame_mhd_queue_response(struct MHD_Connection *connection, unsigned int status_code,
                                                        struct MHD_Response *response) {
    return sesame_mhd()->queue_response(connection, status_code, response);
}

/// What Sesame is told of libmicrohttpd's error log: the message's format string only. The log
/// callback itself takes a `va_list`, which Swift tools cannot always read back from a module
/// (swift-symbolgraph-extract crashes on it), so it stays in C and calls this.
typedef void (*sesame_mhd_log_handler)(void *cls, const char *format);

static inline sesame_mhd_log_handler *sesame_mhd_log_handler_storage(void) {
    static sesame_mhd_log_handler handler;
    return &handler;
}

static inline void sesame_mhd_logger(void *cls, const char *format, va_list arguments) {
    (void)arguments;
    sesame_mhd_log_handler handler = __atomic_load_n(sesame_mhd_log_handler_storage(), __ATOMIC_ACQUIRE);
    if (handler != NULL && format != NULL) handler(cls, format);
}

/// The URI-log callback's type (libmicrohttpd declares it only in prose).
typedef void *(*sesame_mhd_uri_log_callback)(void *cls, const char *uri, struct MHD_Connection *connection);

/// The daemon flags Sesame uses: libmicrohttpd's own polling thread (epoll on Linux), with
/// suspend/resume so that handlers run elsewhere, its error log (to Sesame's logger, which reads
/// it for one thing: see `ConnectionGuard.answerUnreadableLength`), and IPv6 when the socket is IPv6.
static inline unsigned int sesame_mhd_flags(int ipv6)
{
    unsigned int flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (ipv6) flags |= MHD_USE_IPv6;
    return flags;
}

/// Starts a daemon on an already bound and listening socket, or, with `listen_socket` -1, a
/// daemon with no socket of its own that serves the connections `sesame_mhd_accept_loop` hands
/// it. `MHD_start_daemon` is variadic, which Swift cannot call, so every option Sesame uses is a
/// typed parameter here.
static inline struct MHD_Daemon *sesame_mhd_start_daemon(
    unsigned int flags,
    MHD_socket listen_socket,
    MHD_AccessHandlerCallback handler,
    MHD_RequestCompletedCallback completed,
    sesame_mhd_uri_log_callback uri_log,
    void *cls,
    unsigned int connection_limit,
    size_t memory_limit,
    unsigned int connection_timeout_seconds,
    unsigned int per_ip_connection_limit,
    MHD_NotifyConnectionCallback notify_connection,
    sesame_mhd_log_handler log_handler)
{
    // Every server passes the same handler; it is stored before any daemon can log.
    __atomic_store_n(sesame_mhd_log_handler_storage(), log_handler, __ATOMIC_RELEASE);
    // The logger must be the first option, or libmicrohttpd prints to stderr until it is set.
    // Two calls, not one with a computed option: libmicrohttpd refuses MHD_OPTION_LISTEN_SOCKET (even -1)
    // together with MHD_USE_NO_LISTEN_SOCKET, and a variadic list cannot leave an option out.
    if (listen_socket == MHD_INVALID_SOCKET) {
        return sesame_mhd()->start_daemon(
            flags | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, handler, cls,
            MHD_OPTION_EXTERNAL_LOGGER, sesame_mhd_logger, cls,
            MHD_OPTION_NOTIFY_COMPLETED, completed, cls,
            MHD_OPTION_URI_LOG_CALLBACK, uri_log, cls,
            MHD_OPTION_NOTIFY_CONNECTION, notify_connection, cls,
            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_connection_limit,
            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
            MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout_seconds,
            MHD_OPTION_END);
    }
    return sesame_mhd()->start_daemon(
        flags, 0, NULL, NULL, handler, cls,
        MHD_OPTION_EXTERNAL_LOGGER, sesame_mhd_logger, cls,
        MHD_OPTION_LISTEN_SOCKET, listen_socket,
        MHD_OPTION_NOTIFY_COMPLETED, completed, cls,
        MHD_OPTION_URI_LOG_CALLBACK, uri_log, cls,
        MHD_OPTION_NOTIFY_CONNECTION, notify_connection, cls,
        MHD_OPTION_CONNECTION_LIMIT, connection_limit,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_connection_limit,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout_seconds,
        MHD_OPTION_END);
}

/// Accepts connections on `listen_socket` (non-blocking) and hands them to `daemons` in turn,
/// until `wake_fd` becomes readable; returns early only when polling the listening socket itself
/// fails. Left to accept for themselves, several daemons (or the threads of one daemon's pool)
/// race for each connection and the first one awake can take a whole burst: every connection of
/// a load then lands on one thread while the others idle. (A pool given connections by
/// `MHD_add_connection` picks the thread by descriptor number, which is no better: a client in
/// the same process takes every other number, so all its connections land on one thread.)
///
/// When the process is out of descriptors, it waits 100 ms (on `wake_fd`, so a stop is not
/// delayed) rather than spinning on a listening socket that stays readable.
static inline void sesame_mhd_accept_loop(struct MHD_Daemon *const *daemons, unsigned int count, int listen_socket,
                                          int wake_fd)
{
    struct pollfd fds[2] = {{listen_socket, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    unsigned int next = 0;
    for (;;) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return;
        }
        if (fds[1].revents != 0) return;
        if ((fds[0].revents & (POLLERR | POLLNVAL)) != 0) return;
        if ((fds[0].revents & POLLIN) == 0) continue;
        // A bounded burst, then back to poll: a stop is seen between bursts.
        for (int accepted = 0; accepted < 64; accepted++) {
            struct sockaddr_storage address;
            socklen_t length = sizeof address;
            int client = accept4(listen_socket, (struct sockaddr *)&address, &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (client < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                    (void)poll(fds + 1, 1, 100);
                }
                break;
            }
            // libmicrohttpd owns the socket now, and closes it itself when it cannot take it.
            (void)sesame_mhd()->add_connection(daemons[next], client, (const struct sockaddr *)&address, length);
            next = (next + 1) % count;
        }
    }
}

/// The socket of a connection (`MHD_get_connection_info` is variadic); -1 when unknown.
static inline int sesame_mhd_connection_fd(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = sesame_mhd()->get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info != NULL ? info->connect_fd : -1;
}

/// The socket context Sesame set for a connection in its notify-connection callback; NULL when
/// none was set (`MHD_get_connection_info` is variadic).
static inline void *sesame_mhd_socket_context(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = sesame_mhd()->get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info != NULL ? info->socket_context : NULL;
}

/// How many connections the daemon has open (`MHD_get_daemon_info` is variadic).
static inline unsigned int sesame_mhd_connection_count(struct MHD_Daemon *daemon)
{
    const union MHD_DaemonInfo *info = sesame_mhd()->get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info != NULL ? info->num_connections : 0;
}

#endif
