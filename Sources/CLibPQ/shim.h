#ifndef SESAME_CLIBPQ_SHIM_H
#define SESAME_CLIBPQ_SHIM_H

// libpq, PostgreSQL's client library, for SesamePostgres: loaded when a program first connects,
// not when it starts.
//
// Linked, libpq would be opened by every `sesame` process, and with it libssl, libcrypto,
// Kerberos and LDAP (libpq's own dependencies): a few milliseconds of loading and relocation
// for `sesame --help` and `sesame token` on a desktop, which never use PostgreSQL. So the
// program is not linked against it: the first connection opens libpq.so.5 with dlopen and
// resolves the functions Sesame uses, once, thread-safely, as Sources/CCurl/shim.h does for
// libcurl. The header is still libpq's own (libpq-dev), so every type and constant is checked;
// its declarations of the functions below are renamed out of the way, and static inline
// functions of the same names call the resolved ones, so Swift code calls libpq's names.

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define PQconnectdbParams sesame_pq_declared_PQconnectdbParams
#define PQconnectdb sesame_pq_declared_PQconnectdb
#define PQstatus sesame_pq_declared_PQstatus
#define PQfinish sesame_pq_declared_PQfinish
#define PQerrorMessage sesame_pq_declared_PQerrorMessage
#define PQsetNoticeProcessor sesame_pq_declared_PQsetNoticeProcessor
#define PQexecParams sesame_pq_declared_PQexecParams
#define PQresultStatus sesame_pq_declared_PQresultStatus
#define PQresultErrorField sesame_pq_declared_PQresultErrorField
#define PQclear sesame_pq_declared_PQclear
#define PQntuples sesame_pq_declared_PQntuples
#define PQnfields sesame_pq_declared_PQnfields
#define PQgetisnull sesame_pq_declared_PQgetisnull
#define PQgetvalue sesame_pq_declared_PQgetvalue
#define PQgetlength sesame_pq_declared_PQgetlength
#include <postgresql/libpq-fe.h>
#undef PQconnectdbParams
#undef PQconnectdb
#undef PQstatus
#undef PQfinish
#undef PQerrorMessage
#undef PQsetNoticeProcessor
#undef PQexecParams
#undef PQresultStatus
#undef PQresultErrorField
#undef PQclear
#undef PQntuples
#undef PQnfields
#undef PQgetisnull
#undef PQgetvalue
#undef PQgetlength

// MARK: Loading

/// libpq's functions as Sesame uses them, resolved from libpq.so.5.
typedef struct sesame_pq_api {
    PGconn *(*PQconnectdbParams)(const char *const *keywords, const char *const *values, int expand_dbname);
    PGconn *(*PQconnectdb)(const char *conninfo);
    ConnStatusType (*PQstatus)(const PGconn *conn);
    void (*PQfinish)(PGconn *conn);
    char *(*PQerrorMessage)(const PGconn *conn);
    PQnoticeProcessor (*PQsetNoticeProcessor)(PGconn *conn, PQnoticeProcessor proc, void *arg);
    PGresult *(*PQexecParams)(PGconn *conn, const char *command, int nParams, const Oid *paramTypes,
                              const char *const *paramValues, const int *paramLengths, const int *paramFormats,
                              int resultFormat);
    ExecStatusType (*PQresultStatus)(const PGresult *res);
    char *(*PQresultErrorField)(const PGresult *res, int fieldcode);
    void (*PQclear)(PGresult *res);
    int (*PQntuples)(const PGresult *res);
    int (*PQnfields)(const PGresult *res);
    int (*PQgetisnull)(const PGresult *res, int tup_num, int field_num);
    char *(*PQgetvalue)(const PGresult *res, int tup_num, int field_num);
    int (*PQgetlength)(const PGresult *res, int tup_num, int field_num);
} sesame_pq_api;

static inline sesame_pq_api *sesame_pq_storage(void) {
    static sesame_pq_api api;
    return &api;
}

/// Stops the process with `reason` on standard error. A libpq that cannot be opened is a broken
/// installation, not bad input: linked, the same library missing would have kept the program
/// from starting at all.
static inline void sesame_pq_unavailable(const char *reason, const char *detail) {
    fprintf(stderr, "sesame: %s (%s); install PostgreSQL's client library (Debian and Ubuntu: apt install libpq5)\n",
            reason, detail != NULL ? detail : "no detail");
    abort();
}

static inline void sesame_pq_load(void) {
    sesame_pq_api *api = sesame_pq_storage();
    void *library = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) sesame_pq_unavailable("libpq.so.5 could not be loaded", dlerror());
#define SESAME_PQ_RESOLVE(name)                                                                                 \
    do {                                                                                                        \
        *(void **)(&api->name) = dlsym(library, #name);                                                         \
        if (api->name == NULL) sesame_pq_unavailable("the libpq.so.5 found lacks " #name, NULL);                \
    } while (0)
    SESAME_PQ_RESOLVE(PQconnectdbParams);
    SESAME_PQ_RESOLVE(PQconnectdb);
    SESAME_PQ_RESOLVE(PQstatus);
    SESAME_PQ_RESOLVE(PQfinish);
    SESAME_PQ_RESOLVE(PQerrorMessage);
    SESAME_PQ_RESOLVE(PQsetNoticeProcessor);
    SESAME_PQ_RESOLVE(PQexecParams);
    SESAME_PQ_RESOLVE(PQresultStatus);
    SESAME_PQ_RESOLVE(PQresultErrorField);
    SESAME_PQ_RESOLVE(PQclear);
    SESAME_PQ_RESOLVE(PQntuples);
    SESAME_PQ_RESOLVE(PQnfields);
    SESAME_PQ_RESOLVE(PQgetisnull);
    SESAME_PQ_RESOLVE(PQgetvalue);
    SESAME_PQ_RESOLVE(PQgetlength);
#undef SESAME_PQ_RESOLVE
}

/// The resolved functions, loading libpq on the first call (from any thread, once).
static inline const sesame_pq_api *sesame_pq(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, sesame_pq_load);
    return sesame_pq_storage();
}

// MARK: libpq's names

static inline PGconn *PQconnectdbParams(const char *const *keywords, const char *const *values, int expand_dbname) {
    return sesame_pq()->PQconnectdbParams(keywords, values, expand_dbname);
}
static inline PGconn *PQconnectdb(const char *conninfo) { return sesame_pq()->PQconnectdb(conninfo); }
static inline ConnStatusType PQstatus(const PGconn *conn) { return sesame_pq()->PQstatus(conn); }
static inline void PQfinish(PGconn *conn) { sesame_pq()->PQfinish(conn); }
static inline char *PQerrorMessage(const PGconn *conn) { return sesame_pq()->PQerrorMessage(conn); }
static inline PQnoticeProcessor PQsetNoticeProcessor(PGconn *conn, PQnoticeProcessor proc, void *arg) {
    return sesame_pq()->PQsetNoticeProcessor(conn, proc, arg);
}
static inline PGresult *PQexecParams(PGconn *conn, const char *command, int nParams, const Oid *paramTypes,
                                     const char *const *paramValues, const int *paramLengths, const int *paramFormats,
                                     int resultFormat) {
    return sesame_pq()->PQexecParams(conn, command, nParams, paramTypes, paramValues, paramLengths, paramFormats,
                                     resultFormat);
}
static inline ExecStatusType PQresultStatus(const PGresult *res) { return sesame_pq()->PQresultStatus(res); }
static inline char *PQresultErrorField(const PGresult *res, int fieldcode) {
    return sesame_pq()->PQresultErrorField(res, fieldcode);
}
static inline void PQclear(PGresult *res) { sesame_pq()->PQclear(res); }
static inline int PQntuples(const PGresult *res) { return sesame_pq()->PQntuples(res); }
static inline int PQnfields(const PGresult *res) { return sesame_pq()->PQnfields(res); }
static inline int PQgetisnull(const PGresult *res, int tup_num, int field_num) {
    return sesame_pq()->PQgetisnull(res, tup_num, field_num);
}
static inline char *PQgetvalue(const PGresult *res, int tup_num, int field_num) {
    return sesame_pq()->PQgetvalue(res, tup_num, field_num);
}
static inline int PQgetlength(const PGresult *res, int tup_num, int field_num) {
    return sesame_pq()->PQgetlength(res, tup_num, field_num);
}

// MARK: Error fields

// libpq names the fields of an error result with character-literal macros (PG_DIAG_*), which
// Swift does not import.

/// The five-character SQLSTATE of an error result (such as "57014", a cancelled statement), or
/// NULL when the result carries none (an error libpq made itself, such as a lost connection).
static inline const char *sesame_pq_sqlstate(const PGresult *result) {
    return PQresultErrorField(result, PG_DIAG_SQLSTATE);
}

/// The server's one-line primary message of an error result, without the severity prefix and
/// the DETAIL and HINT lines, or NULL.
static inline const char *sesame_pq_primary_message(const PGresult *result) {
    return PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
}

#endif
