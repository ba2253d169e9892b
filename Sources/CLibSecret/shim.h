#ifndef SESAME_CLIBSECRET_SHIM_H
#define SESAME_CLIBSECRET_SHIM_H

// libsecret (the Secret Service client) and GIO, with small non-variadic helpers for what
// Swift cannot call or spell directly: GLib type-cast macros, hash tables of strings, and
// a classification of GError values that SesameKeyring turns into CredentialStoreError.

// The object-path functions (secret-paths.h: items and collections by path, unlocking by path)
// have been unchanged since libsecret 0.18; libsecret still files them as "unstable".
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <gio/gio.h>
#include <libsecret/secret.h>
#include <string.h>

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

/// Direct D-Bus calls to the Secret Service and the bus, for what libsecret does not expose:
/// who owns org.freedesktop.secrets, and properties read afresh rather than from a cache.
/// Each blocks for at most `timeout_ms` (or until `cancellable` is cancelled).

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

static inline GVariant *sesame_call(GDBusConnection *connection, const char *destination, const char *path,
                                    const char *interface, const char *method, GVariant *parameters,
                                    const char *reply_type, int timeout_ms, GCancellable *cancellable,
                                    GError **error) {
    return g_dbus_connection_call_sync(connection, destination, path, interface, method, parameters,
                                       G_VARIANT_TYPE(reply_type), G_DBUS_CALL_FLAGS_NO_AUTO_START, timeout_ms,
                                       cancellable, error);
}

/// Calls in flight side by side: each is sent at once and its reply waited for later, so that
/// calls which do not depend on one another cost one round trip together rather than one each.
/// A batch is used on one thread: its replies are delivered to a main context of its own, which
/// only `sesame_batch_wait` runs.
typedef struct {
    GMainContext *context;
    int pending;
} SesameBatch;

/// One call of a batch: its reply, or its error, once `done`.
typedef struct {
    GVariant *reply;
    GError *error;
    gboolean done;
    SesameBatch *batch;
} SesameBatchCall;

static inline SesameBatch *sesame_batch_new(void) {
    SesameBatch *batch = g_new0(SesameBatch, 1);
    batch->context = g_main_context_new();
    return batch;
}

/// Marks `call` as one more of `batch`'s calls in flight, with no outcome yet.
static inline void sesame_batch_begin(SesameBatch *batch, SesameBatchCall *call) {
    call->reply = NULL;
    call->error = NULL;
    call->done = FALSE;
    call->batch = batch;
    batch->pending += 1;
}

static inline void sesame_batch_call_finished(GObject *source, GAsyncResult *result, gpointer data) {
    SesameBatchCall *call = (SesameBatchCall *)data;
    call->reply = g_dbus_connection_call_finish(G_DBUS_CONNECTION(source), result, &call->error);
    call->done = TRUE;
    call->batch->pending -= 1;
}

/// Sends a call and returns at once; its outcome is in `*call` after `sesame_batch_wait`. The
/// call ends with an error after `timeout_ms`, or when `cancellable` is cancelled.
static inline void sesame_batch_call(SesameBatch *batch, GDBusConnection *connection, const char *destination,
                                     const char *path, const char *interface, const char *method,
                                     GVariant *parameters, const char *reply_type, int timeout_ms,
                                     GCancellable *cancellable, SesameBatchCall *call) {
    sesame_batch_begin(batch, call);
    // The reply is delivered to the thread-default context at the time of the call.
    g_main_context_push_thread_default(batch->context);
    g_dbus_connection_call(connection, destination, path, interface, method, parameters, G_VARIANT_TYPE(reply_type),
                           G_DBUS_CALL_FLAGS_NO_AUTO_START, timeout_ms, cancellable, sesame_batch_call_finished, call);
    g_main_context_pop_thread_default(batch->context);
}

/// Waits until every call of the batch has its reply or error (each call's timeout and
/// cancellable bound the wait).
static inline void sesame_batch_wait(SesameBatch *batch) {
    while (batch->pending > 0) g_main_context_iteration(batch->context, TRUE);
}

/// Waits until `call` (one of the batch's) has its reply or error; the others may still be in
/// flight.
static inline void sesame_batch_wait_for(SesameBatch *batch, SesameBatchCall *call) {
    while (!call->done) g_main_context_iteration(batch->context, TRUE);
}

static inline void sesame_batch_session_opened(GObject *source, GAsyncResult *result, gpointer data) {
    SesameBatchCall *call = (SesameBatchCall *)data;
    secret_service_ensure_session_finish(SECRET_SERVICE(source), result, &call->error);
    call->done = TRUE;
    call->batch->pending -= 1;
}

/// Opens `service`'s session (libsecret's `OpenSession`, a Diffie-Hellman exchange) in
/// `batch`: this thread makes its key pair before this returns, then the service answers while
/// the batch's other calls go on. Once `call` is done without an error, the service has a
/// session; `call->reply` stays NULL. Nothing is sent when the service already has one.
static inline void sesame_batch_ensure_session(SesameBatch *batch, SecretService *service,
                                               GCancellable *cancellable, SesameBatchCall *call) {
    sesame_batch_begin(batch, call);
    g_main_context_push_thread_default(batch->context);
    secret_service_ensure_session(service, cancellable, sesame_batch_session_opened, call);
    g_main_context_pop_thread_default(batch->context);
}

/// Waits for the calls still in flight, then frees the batch; the calls' replies and errors
/// are the caller's to free.
static inline void sesame_batch_free(SesameBatch *batch) {
    sesame_batch_wait(batch);
    g_main_context_unref(batch->context);
    g_free(batch);
}

/// Sends `GetConnectionUnixProcessID` for `name` (a unique or a well-known name) in `batch`.
static inline void sesame_batch_connection_pid(SesameBatch *batch, GDBusConnection *connection, const char *name,
                                               int timeout_ms, GCancellable *cancellable, SesameBatchCall *call) {
    sesame_batch_call(batch, connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                      "GetConnectionUnixProcessID", g_variant_new("(s)", name), "(u)", timeout_ms, cancellable, call);
}

/// The process id in a `GetConnectionUnixProcessID` reply.
static inline guint32 sesame_pid_from_reply(GVariant *reply) {
    guint32 pid = 0;
    g_variant_get(reply, "(u)", &pid);
    return pid;
}

/// `(s)` with `text`, a floating reference for a call's parameters.
static inline GVariant *sesame_variant_string_tuple(const char *text) { return g_variant_new("(s)", text); }

/// A copy of the first member of a tuple whose first member is a string or object path. Free
/// with g_free.
static inline char *sesame_variant_first_string(GVariant *tuple) {
    GVariant *child = g_variant_get_child_value(tuple, 0);
    char *text = g_variant_dup_string(child, NULL);
    g_variant_unref(child);
    return text;
}

/// The unique name of the owner of `name`, or NULL (with `error` set) when nobody owns it.
/// Free with g_free.
static inline char *sesame_name_owner(GDBusConnection *connection, const char *name, int timeout_ms,
                                      GCancellable *cancellable, GError **error) {
    GVariant *reply = sesame_call(connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                  "GetNameOwner", g_variant_new("(s)", name), "(s)", timeout_ms, cancellable, error);
    if (reply == NULL) return NULL;
    char *owner = NULL;
    g_variant_get(reply, "(s)", &owner);
    g_variant_unref(reply);
    return owner;
}

/// The process id of the connection `unique_name`, or 0 (with `error` set).
static inline guint32 sesame_connection_pid(GDBusConnection *connection, const char *unique_name, int timeout_ms,
                                            GCancellable *cancellable, GError **error) {
    GVariant *reply = sesame_call(connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                  "GetConnectionUnixProcessID", g_variant_new("(s)", unique_name), "(u)", timeout_ms,
                                  cancellable, error);
    if (reply == NULL) return 0;
    guint32 pid = 0;
    g_variant_get(reply, "(u)", &pid);
    g_variant_unref(reply);
    return pid;
}

/// Property `property` of `interface` on the Secret Service object `path`, asked afresh.
static inline GVariant *sesame_secret_property(GDBusConnection *connection, const char *path, const char *interface,
                                               const char *property, int timeout_ms, GCancellable *cancellable,
                                               GError **error) {
    GVariant *reply = sesame_call(connection, "org.freedesktop.secrets", path, "org.freedesktop.DBus.Properties", "Get",
                                  g_variant_new("(ss)", interface, property), "(v)", timeout_ms, cancellable, error);
    if (reply == NULL) return NULL;
    GVariant *value = NULL;
    g_variant_get(reply, "(v)", &value);
    g_variant_unref(reply);
    return value;
}

/// A string property (Label), or NULL with `error` set. Free with g_free.
static inline char *sesame_secret_string_property(GDBusConnection *connection, const char *path,
                                                  const char *interface, const char *property, int timeout_ms,
                                                  GCancellable *cancellable, GError **error) {
    GVariant *value = sesame_secret_property(connection, path, interface, property, timeout_ms, cancellable, error);
    if (value == NULL) return NULL;
    char *text = g_variant_is_of_type(value, G_VARIANT_TYPE_STRING) ? g_variant_dup_string(value, NULL) : g_strdup("");
    g_variant_unref(value);
    return text;
}

/// A boolean property (Locked): 1 or 0, or -1 with `error` set.
static inline int sesame_secret_bool_property(GDBusConnection *connection, const char *path, const char *interface,
                                              const char *property, int timeout_ms, GCancellable *cancellable,
                                              GError **error) {
    GVariant *value = sesame_secret_property(connection, path, interface, property, timeout_ms, cancellable, error);
    if (value == NULL) return -1;
    int result = g_variant_is_of_type(value, G_VARIANT_TYPE_BOOLEAN) ? (g_variant_get_boolean(value) ? 1 : 0) : 0;
    g_variant_unref(value);
    return result;
}

/// The object paths of the service's collections, or NULL with `error` set. Free with g_strfreev.
static inline gchar **sesame_secret_collections(GDBusConnection *connection, int timeout_ms,
                                                GCancellable *cancellable, GError **error) {
    GVariant *value = sesame_secret_property(connection, "/org/freedesktop/secrets", "org.freedesktop.Secret.Service",
                                             "Collections", timeout_ms, cancellable, error);
    if (value == NULL) return NULL;
    gchar **paths = g_variant_is_of_type(value, G_VARIANT_TYPE_OBJECT_PATH_ARRAY) ? g_variant_dup_objv(value, NULL)
                                                                                 : g_new0(gchar *, 1);
    g_variant_unref(value);
    return paths;
}

/// `SearchItems`' parameters, `(a{ss})`, from a table of string attributes: a floating reference.
static inline GVariant *sesame_search_parameters(GHashTable *attributes) {
    GVariantBuilder builder;
    g_variant_builder_init(&builder, G_VARIANT_TYPE("a{ss}"));
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, attributes);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        g_variant_builder_add(&builder, "{ss}", (const char *)key, (const char *)value);
    }
    return g_variant_new("(a{ss})", &builder);
}

/// The object paths of the items in the collection `path` whose attributes include
/// `attributes`, or NULL with `error` set. Free with g_strfreev.
static inline gchar **sesame_collection_search(GDBusConnection *connection, const char *path,
                                               GHashTable *attributes, int timeout_ms, GCancellable *cancellable,
                                               GError **error) {
    GVariant *reply = sesame_call(connection, "org.freedesktop.secrets", path, "org.freedesktop.Secret.Collection",
                                  "SearchItems", sesame_search_parameters(attributes), "(ao)", timeout_ms, cancellable,
                                  error);
    if (reply == NULL) return NULL;
    GVariant *list = g_variant_get_child_value(reply, 0);
    gchar **paths = g_variant_dup_objv(list, NULL);
    g_variant_unref(list);
    g_variant_unref(reply);
    return paths;
}

/// Sends the Secret Service's `SearchItems` for `attributes` in `batch`; read its reply with
/// `sesame_search_paths_from_reply`.
static inline void sesame_batch_service_search(SesameBatch *batch, GDBusConnection *connection,
                                               GHashTable *attributes, int timeout_ms, GCancellable *cancellable,
                                               SesameBatchCall *call) {
    sesame_batch_call(batch, connection, "org.freedesktop.secrets", "/org/freedesktop/secrets",
                      "org.freedesktop.Secret.Service", "SearchItems", sesame_search_parameters(attributes), "(aoao)",
                      timeout_ms, cancellable, call);
}

/// The unlocked and the locked items' paths of a `SearchItems` reply (each NULL-terminated;
/// free with g_strfreev).
static inline void sesame_search_paths_from_reply(GVariant *reply, gchar ***unlocked, gchar ***locked) {
    GVariant *first = g_variant_get_child_value(reply, 0);
    GVariant *second = g_variant_get_child_value(reply, 1);
    *unlocked = g_variant_dup_objv(first, NULL);
    *locked = g_variant_dup_objv(second, NULL);
    g_variant_unref(first);
    g_variant_unref(second);
}

/// The items the Secret Service's `SearchItems` finds for `attributes` in every collection: the
/// unlocked ones' paths in `*unlocked` and the locked ones' in `*locked` (each NULL-terminated;
/// free with g_strfreev). Returns FALSE with `error` set. One plain D-Bus call, no item objects.
static inline gboolean sesame_service_search_paths(GDBusConnection *connection, GHashTable *attributes, int timeout_ms,
                                                   GCancellable *cancellable, gchar ***unlocked, gchar ***locked,
                                                   GError **error) {
    GVariant *reply = sesame_call(connection, "org.freedesktop.secrets", "/org/freedesktop/secrets",
                                  "org.freedesktop.Secret.Service", "SearchItems", sesame_search_parameters(attributes),
                                  "(aoao)", timeout_ms, cancellable, error);
    if (reply == NULL) return FALSE;
    sesame_search_paths_from_reply(reply, unlocked, locked);
    g_variant_unref(reply);
    return TRUE;
}

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

/// Fills `properties` from a `Properties.GetAll` reply of an item; a property the service
/// leaves out reads as empty, unlocked or 0.
static inline void sesame_item_properties_from_reply(GVariant *reply, SesameItemProperties *properties) {
    properties->label = NULL;
    properties->attributes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    properties->locked = FALSE;
    properties->modified = 0;
    GVariant *dictionary = g_variant_get_child_value(reply, 0);
    GVariantIter iter;
    const char *name;
    GVariant *value;
    g_variant_iter_init(&iter, dictionary);
    while (g_variant_iter_next(&iter, "{&sv}", &name, &value)) {
        if (strcmp(name, "Label") == 0 && g_variant_is_of_type(value, G_VARIANT_TYPE_STRING)) {
            g_free(properties->label);
            properties->label = g_variant_dup_string(value, NULL);
        } else if (strcmp(name, "Attributes") == 0 && g_variant_is_of_type(value, G_VARIANT_TYPE("a{ss}"))) {
            GVariantIter attributes;
            const char *key, *text;
            g_variant_iter_init(&attributes, value);
            while (g_variant_iter_next(&attributes, "{&s&s}", &key, &text)) {
                g_hash_table_replace(properties->attributes, g_strdup(key), g_strdup(text));
            }
        } else if (strcmp(name, "Locked") == 0 && g_variant_is_of_type(value, G_VARIANT_TYPE_BOOLEAN)) {
            properties->locked = g_variant_get_boolean(value);
        } else if (strcmp(name, "Modified") == 0 && g_variant_is_of_type(value, G_VARIANT_TYPE_UINT64)) {
            properties->modified = g_variant_get_uint64(value);
        }
        g_variant_unref(value);
    }
    g_variant_unref(dictionary);
    if (properties->label == NULL) properties->label = g_strdup("");
}

/// Sends an item's `org.freedesktop.DBus.Properties.GetAll` in `batch`: its label, attributes,
/// lock state and modification time with one call, where a libsecret item object costs five
/// (name look-ups, signal subscriptions and the same GetAll). Read its reply with
/// `sesame_item_properties_from_reply`.
static inline void sesame_batch_item_properties(SesameBatch *batch, GDBusConnection *connection, const char *path,
                                                int timeout_ms, GCancellable *cancellable, SesameBatchCall *call) {
    sesame_batch_call(batch, connection, "org.freedesktop.secrets", path, "org.freedesktop.DBus.Properties", "GetAll",
                      g_variant_new("(s)", "org.freedesktop.Secret.Item"), "(a{sv})", timeout_ms, cancellable, call);
}

/// The secrets in a `GetSecrets` reply, decrypted by libsecret with `service`'s session: a
/// table from path (char *) to SecretValue *; free with g_hash_table_unref.
static inline GHashTable *sesame_item_secrets_from_reply(SecretService *service, GVariant *reply) {
    GHashTable *secrets = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, secret_value_unref);
    GVariant *dictionary = g_variant_get_child_value(reply, 0);
    GVariantIter iter;
    const char *path;
    GVariant *encoded;
    g_variant_iter_init(&iter, dictionary);
    while (g_variant_iter_next(&iter, "{&o@(oayays)}", &path, &encoded)) {
        SecretValue *value = secret_service_decode_dbus_secret(service, encoded);
        if (value != NULL) g_hash_table_replace(secrets, g_strdup(path), value);
        g_variant_unref(encoded);
    }
    g_variant_unref(dictionary);
    return secrets;
}

/// Sends `GetSecrets` for the items at `paths` (NULL-terminated) through `service`'s open
/// session in `batch`, or returns FALSE (sending nothing) when the service has no open session.
/// Read its reply with `sesame_item_secrets_from_reply`; an item the service leaves out of its
/// answer is left out of the table.
///
/// The call is made here rather than through `secret_service_get_secrets_for_dbus_paths_sync`,
/// which in libsecret 0.20.5 never releases the service's reply (about 1.8 KB a read).
static inline gboolean sesame_batch_item_secrets(SesameBatch *batch, SecretService *service,
                                                 GDBusConnection *connection, const char *const *paths,
                                                 int timeout_ms, GCancellable *cancellable, SesameBatchCall *call) {
    const char *session = secret_service_get_session_dbus_path(service);
    if (session == NULL) return FALSE;
    sesame_batch_call(batch, connection, "org.freedesktop.secrets", "/org/freedesktop/secrets",
                      "org.freedesktop.Secret.Service", "GetSecrets", g_variant_new("(^aoo)", paths, session),
                      "(a{o(oayays)})", timeout_ms, cancellable, call);
    return TRUE;
}

/// The SecretValue that `sesame_item_secrets_from_reply` read for `path`, or NULL; owned by the table.
static inline SecretValue *sesame_secrets_get(GHashTable *secrets, const char *path) {
    return (SecretValue *)g_hash_table_lookup(secrets, path);
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
