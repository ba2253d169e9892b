#ifndef SESAME_CLIBSECRETSHIM_H
#define SESAME_CLIBSECRETSHIM_H

// What SesameKeyring needs of libsecret and GIO beyond thin wrappers (those are in CLibSecret's
// shim.h): Sesame's item schema, D-Bus calls that libsecret does not make (who owns the Secret
// Service, properties read afresh rather than from libsecret's cache, searches that return
// paths), and a classification of GError values that SesameKeyring turns into
// CredentialStoreError. Each call blocks for at most `timeout_ms` (or until `cancellable` is
// cancelled) and starts no service.

#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <gio/gio.h>
#include <libsecret/secret.h>

/// The schema of Sesame's keyring items. libsecret stores its name as the `xdg:schema`
/// attribute (seahorse and `secret-tool search` show it as `schema`), and every search Sesame
/// makes includes it, so other applications' items are never read. All attributes are
/// strings and none is secret: attributes are stored unencrypted.
const SecretSchema *sesame_credential_schema(void);

/// A copy of the first member of a tuple whose first member is a string or object path. Free
/// with g_free.
char *sesame_variant_first_string(GVariant *tuple);

/// The unique name of the owner of `name`, or NULL (with `error` set) when nobody owns it.
/// Free with g_free.
char *sesame_name_owner(GDBusConnection *connection, const char *name, int timeout_ms, GCancellable *cancellable,
                        GError **error);

/// The process id of the connection `unique_name`, or 0 (with `error` set).
guint32 sesame_connection_pid(GDBusConnection *connection, const char *unique_name, int timeout_ms,
                              GCancellable *cancellable, GError **error);

/// A string property (Label) of `interface` on the Secret Service object `path`, asked afresh,
/// or NULL with `error` set. Free with g_free.
char *sesame_secret_string_property(GDBusConnection *connection, const char *path, const char *interface,
                                    const char *property, int timeout_ms, GCancellable *cancellable, GError **error);

/// A boolean property (Locked), asked afresh: 1 or 0, or -1 with `error` set.
int sesame_secret_bool_property(GDBusConnection *connection, const char *path, const char *interface,
                                const char *property, int timeout_ms, GCancellable *cancellable, GError **error);

/// The object paths of the service's collections, or NULL with `error` set. Free with g_strfreev.
gchar **sesame_secret_collections(GDBusConnection *connection, int timeout_ms, GCancellable *cancellable,
                                  GError **error);

/// The object paths of the items in the collection `path` whose attributes include
/// `attributes`, or NULL with `error` set. Free with g_strfreev.
gchar **sesame_collection_search(GDBusConnection *connection, const char *path, GHashTable *attributes,
                                 int timeout_ms, GCancellable *cancellable, GError **error);

/// The items the Secret Service's `SearchItems` finds for `attributes` in every collection: the
/// unlocked ones' paths in `*unlocked` and the locked ones' in `*locked` (each NULL-terminated;
/// free with g_strfreev). Returns FALSE with `error` set. One plain D-Bus call, no item objects.
gboolean sesame_service_search_paths(GDBusConnection *connection, GHashTable *attributes, int timeout_ms,
                                     GCancellable *cancellable, gchar ***unlocked, gchar ***locked, GError **error);

/// What a GError from GIO or libsecret means for Sesame.
typedef enum {
    /// Anything else; the message says what.
    SESAME_FAILURE_OTHER = 0,
    /// The call was cancelled (Sesame cancels a call when its deadline passes).
    SESAME_FAILURE_CANCELLED = 1,
    /// Nobody owns org.freedesktop.secrets and it cannot be started.
    SESAME_FAILURE_NO_SERVICE = 2,
    /// The bus connection is closed or was never made.
    SESAME_FAILURE_DISCONNECTED = 3,
    /// The service did not reply in time (D-Bus's own timeout).
    SESAME_FAILURE_NO_REPLY = 4,
    /// The item or collection is locked.
    SESAME_FAILURE_LOCKED = 5,
    /// The object went away (deleted meanwhile).
    SESAME_FAILURE_NO_SUCH_OBJECT = 6,
    /// The bus or the service refused the call.
    SESAME_FAILURE_ACCESS_DENIED = 7,
} SesameFailure;

/// Classifies `error` (never NULL).
SesameFailure sesame_classify_error(const GError *error);

#endif
