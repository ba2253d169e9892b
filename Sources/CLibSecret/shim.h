#ifndef SESAME_CLIBSECRET_SHIM_H
#define SESAME_CLIBSECRET_SHIM_H

// libsecret (the Secret Service client) and GIO, with thin static inline wrappers for what
// Swift cannot call or spell directly: GLib type-cast macros and hash tables of strings. The
// C that does more lives in the CLibSecretShim target.

// The object-path functions (secret-paths.h: unlocking by path) have been unchanged since
// libsecret 0.18; libsecret still files them as "unstable".
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <gio/gio.h>
#include <libsecret/secret.h>

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

/// The connection a libsecret proxy (the service, a collection, an item) talks on.
static inline GDBusConnection *sesame_proxy_connection(gpointer proxy) {
    return g_dbus_proxy_get_connection(G_DBUS_PROXY(proxy));
}

/// The unique bus name of the service a proxy talks to, as the proxy last saw it (no call is
/// made), or NULL. Free with g_free.
static inline char *sesame_proxy_name_owner(gpointer proxy) {
    return g_dbus_proxy_get_name_owner(G_DBUS_PROXY(proxy));
}

/// A connection to the message bus at `address` (for a bus other than the process's session bus).
static inline GDBusConnection *sesame_bus_for_address(const char *address, GCancellable *cancellable, GError **error) {
    return g_dbus_connection_new_for_address_sync(
        address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION, NULL,
        cancellable, error);
}

/// A D-Bus call that blocks for at most `timeout_ms` (or until `cancellable` is cancelled) and
/// starts no service.
static inline GVariant *sesame_call(GDBusConnection *connection, const char *destination, const char *path,
                                    const char *interface, const char *method, GVariant *parameters,
                                    const char *reply_type, int timeout_ms, GCancellable *cancellable,
                                    GError **error) {
    return g_dbus_connection_call_sync(connection, destination, path, interface, method, parameters,
                                       G_VARIANT_TYPE(reply_type), G_DBUS_CALL_FLAGS_NO_AUTO_START, timeout_ms,
                                       cancellable, error);
}

/// `(s)` with `text`, a floating reference for a call's parameters.
static inline GVariant *sesame_variant_string_tuple(const char *text) { return g_variant_new("(s)", text); }

#endif
