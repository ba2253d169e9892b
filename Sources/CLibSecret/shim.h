#ifndef SESAME_CLIBSECRET_SHIM_H
#define SESAME_CLIBSECRET_SHIM_H

// libsecret (the Secret Service client) and GIO, with small non-variadic helpers for what
// Swift cannot call or spell directly: GLib type-cast macros, hash tables of strings, and
// a classification of GError values that SesameKeyring turns into CredentialStoreError.

// The object-path functions (secret-paths.h: items and collections by path, unlocking by path)
// have been unchanged since libsecret 0.18; libsecret still files them as "unstable".
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <gcrypt.h>
#include <gio/gio.h>
#include <libsecret/secret.h>
#include <string.h>
#include <sys/random.h>

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

/// The secrets in a `GetSecrets` reply, each decrypted by `decode` (NULL: left out): a table
/// from path (char *) to SecretValue *; free with g_hash_table_unref.
static inline GHashTable *sesame_secrets_from_reply(GVariant *reply, SecretValue *(*decode)(gpointer, GVariant *),
                                                    gpointer decoder) {
    GHashTable *secrets = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, secret_value_unref);
    GVariant *dictionary = g_variant_get_child_value(reply, 0);
    GVariantIter iter;
    const char *path;
    GVariant *encoded;
    g_variant_iter_init(&iter, dictionary);
    while (g_variant_iter_next(&iter, "{&o@(oayays)}", &path, &encoded)) {
        SecretValue *value = decode(decoder, encoded);
        if (value != NULL) g_hash_table_replace(secrets, g_strdup(path), value);
        g_variant_unref(encoded);
    }
    g_variant_unref(dictionary);
    return secrets;
}

static inline SecretValue *sesame_libsecret_decode(gpointer service, GVariant *encoded) {
    return secret_service_decode_dbus_secret((SecretService *)service, encoded);
}

/// The secrets in a `GetSecrets` reply, decrypted by libsecret with `service`'s session (see
/// `sesame_secrets_from_reply`).
static inline GHashTable *sesame_item_secrets_from_reply(SecretService *service, GVariant *reply) {
    return sesame_secrets_from_reply(reply, sesame_libsecret_decode, service);
}

/// Sends `GetSecrets` for the items at `paths` (NULL-terminated) through the session at
/// `session_path` in `batch`.
static inline void sesame_batch_get_secrets(SesameBatch *batch, GDBusConnection *connection, const char *session_path,
                                            const char *const *paths, int timeout_ms, GCancellable *cancellable,
                                            SesameBatchCall *call) {
    sesame_batch_call(batch, connection, "org.freedesktop.secrets", "/org/freedesktop/secrets",
                      "org.freedesktop.Secret.Service", "GetSecrets", g_variant_new("(^aoo)", paths, session_path),
                      "(a{o(oayays)})", timeout_ms, cancellable, call);
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
    sesame_batch_get_secrets(batch, connection, session, paths, timeout_ms, cancellable, call);
    return TRUE;
}

// MARK: A session of Sesame's own for reading secrets

// libsecret opens its session ("dh-ietf1024-sha256-aes128-cbc-pkcs7") with a 1024-bit private
// exponent: two 1024-bit modular exponentiations of about 1.3 ms each, one before `OpenSession`
// is sent and one after its answer, both on the path of every `sesame token`. The same
// algorithm with a 256-bit exponent costs a quarter of that. A 1024-bit MODP group gives about
// 80 bits of security whatever the exponent; 256 bits is more than the 160 that common practice
// (RFC 3526 section 8, NIST SP 800-56A) asks for such a group. The session is the one the Secret
// Service specification defines, so the service cannot tell it from libsecret's: group 2 of RFC
// 2409 with generator 2, the shared value padded to 128 bytes, HKDF-SHA256 (no salt, no info) to a
// 16-byte AES key, secrets in AES-128-CBC with PKCS#7 padding. It is used only to read; writes
// and anything that fails here go through libsecret's own session.
//
// libgcrypt (libsecret's own crypto library, already in the process) does the arithmetic, the
// HMAC and the cipher, with none of its secure-memory or random-pool machinery: the exponent comes
// from getrandom(2), and libgcrypt is not declared initialised, so libsecret still sets it up its
// own way when it opens a session later.

/// Sesame's session with the Secret Service: its private exponent until the service answers,
/// then the session's object path and AES key.
typedef struct SesameSecretSession {
    gcry_mpi_t exponent;
    char *path;
    unsigned char key[16];
} SesameSecretSession;

#define SESAME_SECRET_ALGORITHM "dh-ietf1024-sha256-aes128-cbc-pkcs7"

/// RFC 2409's 1024-bit MODP group (group 2), as the Secret Service specification names it.
static inline gcry_mpi_t sesame_modp1024_prime(void) {
    static const char hex[] = "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22"
                              "514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7E"
                              "C6F44C42E9A637ED6B0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE6"
                              "5381FFFFFFFFFFFFFFFF";
    gcry_mpi_t prime = NULL;
    if (gcry_mpi_scan(&prime, GCRYMPI_FMT_HEX, hex, 0, NULL) != 0) return NULL;
    return prime;
}

/// HMAC-SHA256 of `data` under `key` into `out` (32 bytes); FALSE if libgcrypt failed.
static inline gboolean sesame_hmac_sha256(const unsigned char *key, size_t key_length, const unsigned char *data,
                                          size_t length, unsigned char out[32]) {
    gcry_md_hd_t md;
    if (gcry_md_open(&md, GCRY_MD_SHA256, GCRY_MD_FLAG_HMAC) != 0) return FALSE;
    gboolean ok = gcry_md_setkey(md, key, key_length) == 0;
    if (ok) {
        gcry_md_write(md, data, length);
        const unsigned char *digest = gcry_md_read(md, GCRY_MD_SHA256);
        ok = digest != NULL;
        if (ok) memcpy(out, digest, 32);
    }
    gcry_md_close(md);
    return ok;
}

/// Makes a fresh session's key pair and returns `OpenSession`'s parameters (a floating
/// reference), or NULL when libgcrypt or the kernel's random source failed (then read through
/// libsecret's session instead). Free the session with `sesame_secret_session_free`.
static inline GVariant *sesame_secret_session_request(SesameSecretSession *session) {
    memset(session, 0, sizeof *session);
    if (gcry_check_version(NULL) == NULL) return NULL;
    unsigned char random[32];
    if (getrandom(random, sizeof random, 0) != (ssize_t)sizeof random) return NULL;
    random[0] |= 0x80;  // exactly 256 bits: never a small exponent
    gcry_mpi_t prime = sesame_modp1024_prime();
    gcry_mpi_t exponent = NULL;
    gcry_error_t scanned = gcry_mpi_scan(&exponent, GCRYMPI_FMT_USG, random, sizeof random, NULL);
    explicit_bzero(random, sizeof random);
    if (prime == NULL || scanned != 0) {
        gcry_mpi_release(prime);
        gcry_mpi_release(exponent);
        return NULL;
    }
    gcry_mpi_t generator = gcry_mpi_set_ui(NULL, 2);
    gcry_mpi_t public_key = gcry_mpi_new(1024);
    gcry_mpi_powm(public_key, generator, exponent, prime);
    unsigned char bytes[128];
    size_t length = 0;
    gcry_error_t printed = gcry_mpi_print(GCRYMPI_FMT_USG, bytes, sizeof bytes, &length, public_key);
    gcry_mpi_release(public_key);
    gcry_mpi_release(generator);
    gcry_mpi_release(prime);
    if (printed != 0) {
        gcry_mpi_release(exponent);
        return NULL;
    }
    session->exponent = exponent;
    GVariant *input = g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, bytes, length, 1);
    return g_variant_new("(sv)", SESAME_SECRET_ALGORITHM, input);
}

/// Sends `OpenSession` with `parameters` (from `sesame_secret_session_request`) in `batch`.
static inline void sesame_batch_open_session(SesameBatch *batch, GDBusConnection *connection, GVariant *parameters,
                                             int timeout_ms, GCancellable *cancellable, SesameBatchCall *call) {
    sesame_batch_call(batch, connection, "org.freedesktop.secrets", "/org/freedesktop/secrets",
                      "org.freedesktop.Secret.Service", "OpenSession", parameters, "(vo)", timeout_ms, cancellable,
                      call);
}

/// Completes `session` from `OpenSession`'s reply: the service's public key (which must lie
/// strictly between 1 and p - 1), the shared value, the AES key. Returns TRUE when the session is
/// ready; its exponent is gone either way.
static inline gboolean sesame_secret_session_finish(SesameSecretSession *session, GVariant *reply) {
    gcry_mpi_t exponent = session->exponent;
    session->exponent = NULL;
    if (exponent == NULL || !g_variant_is_of_type(reply, G_VARIANT_TYPE("(vo)"))) {
        gcry_mpi_release(exponent);
        return FALSE;
    }
    GVariant *output = NULL;
    char *path = NULL;
    g_variant_get(reply, "(vo)", &output, &path);
    gboolean ok = FALSE;
    gcry_mpi_t prime = sesame_modp1024_prime();
    gcry_mpi_t peer = NULL;
    gsize length = 0;
    const unsigned char *bytes = NULL;
    if (prime != NULL && g_variant_is_of_type(output, G_VARIANT_TYPE_BYTESTRING)) {
        bytes = g_variant_get_fixed_array(output, &length, 1);
    }
    if (bytes != NULL && length > 0 && length <= 128 &&
        gcry_mpi_scan(&peer, GCRYMPI_FMT_USG, bytes, length, NULL) == 0) {
        gcry_mpi_t upper = gcry_mpi_new(1024);
        gcry_mpi_sub_ui(upper, prime, 1);
        if (gcry_mpi_cmp_ui(peer, 1) > 0 && gcry_mpi_cmp(peer, upper) < 0) {
            gcry_mpi_t shared = gcry_mpi_new(1024);
            gcry_mpi_powm(shared, peer, exponent, prime);
            unsigned char ikm[128];
            size_t written = 0;
            if (gcry_mpi_print(GCRYMPI_FMT_USG, ikm, sizeof ikm, &written, shared) == 0 && written <= sizeof ikm) {
                // Padded on the left to the prime's 128 bytes, as the specification's peers do.
                memmove(ikm + (sizeof ikm - written), ikm, written);
                memset(ikm, 0, sizeof ikm - written);
                // HKDF-SHA256 (RFC 5869) with no salt (32 zero bytes) and no info, 16 bytes out.
                unsigned char zeros[32] = {0}, prk[32], block[32], one = 1;
                ok = sesame_hmac_sha256(zeros, sizeof zeros, ikm, sizeof ikm, prk) &&
                     sesame_hmac_sha256(prk, sizeof prk, &one, 1, block);
                if (ok) memcpy(session->key, block, sizeof session->key);
                explicit_bzero(prk, sizeof prk);
                explicit_bzero(block, sizeof block);
            }
            explicit_bzero(ikm, sizeof ikm);
            gcry_mpi_release(shared);
        }
        gcry_mpi_release(upper);
    }
    gcry_mpi_release(peer);
    gcry_mpi_release(prime);
    gcry_mpi_release(exponent);
    if (output != NULL) g_variant_unref(output);
    if (ok) {
        session->path = path;
    } else {
        g_free(path);
        explicit_bzero(session->key, sizeof session->key);
    }
    return ok;
}

/// The session's object path once it is ready, else NULL.
static inline const char *sesame_secret_session_path(const SesameSecretSession *session) { return session->path; }

/// Sends `GetSecrets` for the items at `paths` (NULL-terminated) through `session` in `batch`.
/// Read its reply with `sesame_secret_session_secrets_from_reply`.
static inline void sesame_batch_session_secrets(SesameBatch *batch, GDBusConnection *connection,
                                                const SesameSecretSession *session, const char *const *paths,
                                                int timeout_ms, GCancellable *cancellable, SesameBatchCall *call) {
    sesame_batch_get_secrets(batch, connection, session->path, paths, timeout_ms, cancellable, call);
}

/// One secret of a `GetSecrets` reply, decrypted with `session`'s key, or NULL when it was not
/// sent through this session or does not decrypt to well-padded data.
static inline SecretValue *sesame_secret_session_decode(const SesameSecretSession *session, GVariant *encoded) {
    const char *sender = NULL;
    GVariant *parameter = NULL, *value = NULL;
    const char *content_type = NULL;
    g_variant_get(encoded, "(&o@ay@ay&s)", &sender, &parameter, &value, &content_type);
    SecretValue *result = NULL;
    gsize iv_length = 0, length = 0;
    const unsigned char *iv = g_variant_get_fixed_array(parameter, &iv_length, 1);
    const unsigned char *ciphertext = g_variant_get_fixed_array(value, &length, 1);
    gcry_cipher_hd_t cipher = NULL;
    if (session->path != NULL && strcmp(sender, session->path) == 0 && iv_length == 16 && length > 0 &&
        length % 16 == 0 && gcry_cipher_open(&cipher, GCRY_CIPHER_AES128, GCRY_CIPHER_MODE_CBC, 0) == 0) {
        unsigned char *plain = g_malloc(length);
        if (gcry_cipher_setkey(cipher, session->key, sizeof session->key) == 0 &&
            gcry_cipher_setiv(cipher, iv, iv_length) == 0 &&
            gcry_cipher_decrypt(cipher, plain, length, ciphertext, length) == 0) {
            unsigned pad = plain[length - 1];
            gboolean padded = pad >= 1 && pad <= 16 && pad <= length;
            for (gsize i = length - (padded ? pad : 0); padded && i < length; i++) padded = plain[i] == pad;
            // secret_value_new copies the bytes into libsecret's own (locked) memory.
            if (padded) result = secret_value_new((const gchar *)plain, (gssize)(length - pad), content_type);
        }
        explicit_bzero(plain, length);
        g_free(plain);
        gcry_cipher_close(cipher);
    }
    g_variant_unref(parameter);
    g_variant_unref(value);
    return result;
}

static inline SecretValue *sesame_secret_session_decoder(gpointer session, GVariant *encoded) {
    return sesame_secret_session_decode((const SesameSecretSession *)session, encoded);
}

/// The secrets in a `GetSecrets` reply sent through `session` (see `sesame_secrets_from_reply`).
static inline GHashTable *sesame_secret_session_secrets_from_reply(SesameSecretSession *session, GVariant *reply) {
    return sesame_secrets_from_reply(reply, sesame_secret_session_decoder, session);
}

/// Closes `session` on the service, if it was opened and not closed yet, without waiting for
/// the answer; after this it reads no more secrets. The call is written to the bus before this
/// returns: GDBus writes from a thread of its own, and a process that exits right after a read
/// (`sesame token`) could otherwise end before that thread wrote it. (The service closes a
/// session when its connection goes, but a long-lived process counts on the call.) The flush
/// waits for the write only, not for an answer.
static inline void sesame_secret_session_close(SesameSecretSession *session, GDBusConnection *connection) {
    if (session->path != NULL && connection != NULL) {
        g_dbus_connection_call(connection, "org.freedesktop.secrets", session->path, "org.freedesktop.Secret.Session",
                               "Close", NULL, NULL, G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, NULL, NULL, NULL);
        (void)g_dbus_connection_flush_sync(connection, NULL, NULL);
    }
    g_free(session->path);
    session->path = NULL;
    explicit_bzero(session->key, sizeof session->key);
}

/// Closes `session` (see `sesame_secret_session_close`) and frees what it holds.
static inline void sesame_secret_session_free(SesameSecretSession *session, GDBusConnection *connection) {
    sesame_secret_session_close(session, connection);
    gcry_mpi_release(session->exponent);
    explicit_bzero(session, sizeof *session);
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
