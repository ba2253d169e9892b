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
#include <microhttpd.h>

/// The URI-log callback's type (libmicrohttpd declares it only in prose).
typedef void *(*sesame_mhd_uri_log_callback)(void *cls, const char *uri, struct MHD_Connection *connection);

/// The daemon flags Sesame uses: libmicrohttpd's own polling thread (epoll on Linux), with
/// suspend/resume so that handlers run elsewhere, and IPv6 when the socket is IPv6.
static inline unsigned int sesame_mhd_flags(int ipv6)
{
    unsigned int flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
    if (ipv6) flags |= MHD_USE_IPv6;
    return flags;
}

/// Starts a daemon on an already bound and listening socket. `MHD_start_daemon` is variadic,
/// which Swift cannot call, so every option Sesame uses is a typed parameter here.
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
    MHD_NotifyConnectionCallback notify_connection)
{
    return MHD_start_daemon(
        flags, 0, NULL, NULL, handler, cls,
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

/// The socket of a connection (`MHD_get_connection_info` is variadic); -1 when unknown.
static inline int sesame_mhd_connection_fd(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info != NULL ? info->connect_fd : -1;
}

/// How many connections the daemon has open (`MHD_get_daemon_info` is variadic).
static inline unsigned int sesame_mhd_connection_count(struct MHD_Daemon *daemon)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info != NULL ? info->num_connections : 0;
}

#endif
