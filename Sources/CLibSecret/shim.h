#ifndef SESAME_CLIBSECRET_SHIM_H
#define SESAME_CLIBSECRET_SHIM_H

// libsecret (the Secret Service client) and GIO, with small non-variadic helpers for what
// Swift cannot call or spell directly: GLib type-cast macros, hash tables of strings, and
// a classification of GError values that SesameKeyring turns into CredentialStoreError.

#include <gio/gio.h>
#include <libsecret/secret.h>

/// The schema of Sesame's keyring items. libsecret stores its name as the `xdg:schema`
/// attribute (seahorse and `secret-tool search` show it as `schema`), and every search Sesame
/// makes includes it, so other applications' items are never read. All attributes are
/// strings and none is secret: attributes are stored unencrypted.
static inline const SecretSchema *sesame_credential_schema(void) {
    static const SecretSchema schema = {
        "org.sesame.Credential",
        SECRET_SCHEMA_NONE,
        {
            {"provider", SECRET_SCHEMA_ATTRIBUTE_STRING},
            {"app_id", SECRET_SCHEMA_ATTRIBUTE_STRING},
            {"account", SECRET_SCHEMA_ATTRIBUTE_STRING},
            {"schema_version", SECRET_SCHEMA_ATTRIBUTE_STRING},
            {NULL, 0},
        },
    };
    return &schema;
}

/// A new table of string attributes that owns copies of its keys and values.
static inline GHashTable *sesame_attributes_new(void) {
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
}

/// Sets `key` to `value` in a table made by `sesame_attributes_new` (both are copied).
static inline void sesame_attributes_set(GHashTable *table, const char *key, const char *value) {
    g_hash_table_replace(table, g_strdup(key), g_strdup(value));
}

/// The value of `key` in a table of string attributes, or NULL.
static inline const char *sesame_attributes_get(GHashTable *table, const char *key) {
    return (const char *)g_hash_table_lookup(table, key);
}

/// The D-Bus object path of a libsecret proxy (an item, a collection).
static inline const char *sesame_object_path(gpointer proxy) {
    return g_dbus_proxy_get_object_path(G_DBUS_PROXY(proxy));
}

/// Frees a list of GObjects and drops a reference on each.
static inline void sesame_object_list_free(GList *list) {
    g_list_free_full(list, g_object_unref);
}

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
static inline SesameFailure sesame_classify_error(const GError *error) {
    if (error->domain == G_IO_ERROR) {
        switch (error->code) {
        case G_IO_ERROR_CANCELLED: return SESAME_FAILURE_CANCELLED;
        case G_IO_ERROR_TIMED_OUT: return SESAME_FAILURE_NO_REPLY;
        case G_IO_ERROR_CLOSED:
        case G_IO_ERROR_BROKEN_PIPE:
        case G_IO_ERROR_NOT_CONNECTED:
        case G_IO_ERROR_CONNECTION_REFUSED:
        case G_IO_ERROR_NOT_FOUND: return SESAME_FAILURE_DISCONNECTED;
        case G_IO_ERROR_PERMISSION_DENIED: return SESAME_FAILURE_ACCESS_DENIED;
        default: return SESAME_FAILURE_OTHER;
        }
    }
    if (error->domain == G_DBUS_ERROR) {
        switch (error->code) {
        case G_DBUS_ERROR_SERVICE_UNKNOWN:
        case G_DBUS_ERROR_NAME_HAS_NO_OWNER:
        case G_DBUS_ERROR_SPAWN_EXEC_FAILED:
        case G_DBUS_ERROR_SPAWN_FORK_FAILED:
        case G_DBUS_ERROR_SPAWN_CHILD_EXITED:
        case G_DBUS_ERROR_SPAWN_CHILD_SIGNALED:
        case G_DBUS_ERROR_SPAWN_FAILED:
        case G_DBUS_ERROR_SPAWN_SETUP_FAILED:
        case G_DBUS_ERROR_SPAWN_CONFIG_INVALID:
        case G_DBUS_ERROR_SPAWN_SERVICE_INVALID:
        case G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND:
        case G_DBUS_ERROR_SPAWN_PERMISSIONS_INVALID:
        case G_DBUS_ERROR_SPAWN_FILE_INVALID:
        case G_DBUS_ERROR_SPAWN_NO_MEMORY: return SESAME_FAILURE_NO_SERVICE;
        case G_DBUS_ERROR_NO_REPLY:
        case G_DBUS_ERROR_TIMEOUT:
        case G_DBUS_ERROR_TIMED_OUT: return SESAME_FAILURE_NO_REPLY;
        case G_DBUS_ERROR_DISCONNECTED:
        case G_DBUS_ERROR_NO_SERVER: return SESAME_FAILURE_DISCONNECTED;
        case G_DBUS_ERROR_ACCESS_DENIED:
        case G_DBUS_ERROR_AUTH_FAILED: return SESAME_FAILURE_ACCESS_DENIED;
        case G_DBUS_ERROR_UNKNOWN_OBJECT:
        case G_DBUS_ERROR_UNKNOWN_METHOD: return SESAME_FAILURE_NO_SUCH_OBJECT;
        default: return SESAME_FAILURE_OTHER;
        }
    }
    if (error->domain == SECRET_ERROR) {
        switch (error->code) {
        case SECRET_ERROR_IS_LOCKED: return SESAME_FAILURE_LOCKED;
        case SECRET_ERROR_NO_SUCH_OBJECT: return SESAME_FAILURE_NO_SUCH_OBJECT;
        default: return SESAME_FAILURE_OTHER;
        }
    }
    return SESAME_FAILURE_OTHER;
}

#endif
