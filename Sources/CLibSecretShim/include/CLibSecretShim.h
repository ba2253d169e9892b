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

/// What Sesame reads of an item besides its secret, from one `Properties.GetAll`.
typedef struct {
    /// The label; free with g_free. Never NULL after a successful read.
    char *label;
    /// The attributes, strings to strings; free with g_hash_table_unref. Never NULL after a
    /// successful read.
    GHashTable *attributes;
    gboolean locked;
    guint64 modified;
} SesameItemProperties;

/// Reads the label, attributes, lock state and modification time of the item at `path` into
/// `properties` with one `Properties.GetAll` (a property the service leaves out reads as empty,
/// unlocked or 0). Returns FALSE with `error` set.
gboolean sesame_item_properties(GDBusConnection *connection, const char *path, int timeout_ms,
                                GCancellable *cancellable, SesameItemProperties *properties, GError **error);

/// The secrets of the items at `paths` (NULL-terminated), read with one `GetSecrets` through
/// `service`'s open session and decrypted by libsecret: a table from path (char *) to
/// SecretValue *, without the items the service left out; free with g_hash_table_unref. NULL
/// with `error` set.
///
/// The call is made here rather than through `secret_service_get_secrets_for_dbus_paths_sync`,
/// which in libsecret 0.20.5 never releases the service's reply (about 1.8 KB a read).
GHashTable *sesame_item_secrets(SecretService *service, const char *const *paths, int timeout_ms,
                                GCancellable *cancellable, GError **error);

/// The SecretValue that `sesame_item_secrets` read for `path`, or NULL; owned by the table.
SecretValue *sesame_secrets_get(GHashTable *secrets, const char *path);

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
