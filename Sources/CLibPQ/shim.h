#ifndef SESAME_CLIBPQ_SHIM_H
#define SESAME_CLIBPQ_SHIM_H

// libpq, PostgreSQL's client library (libpq-dev), for SesamePostgres. Swift calls libpq's own
// functions directly; the wrappers below exist only where Swift cannot: libpq names the fields
// of an error result with character-literal macros (PG_DIAG_*), which Swift does not import.

#include <libpq-fe.h>

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
