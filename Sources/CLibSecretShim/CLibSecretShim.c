#include "CLibSecretShim.h"

#include <string.h>

const SecretSchema *sesame_credential_schema(void) {
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

static GVariant *call(GDBusConnection *connection, const char *destination, const char *path, const char *interface,
                      const char *method, GVariant *parameters, const char *reply_type, int timeout_ms,
                      GCancellable *cancellable, GError **error) {
    return g_dbus_connection_call_sync(connection, destination, path, interface, method, parameters,
                                       G_VARIANT_TYPE(reply_type), G_DBUS_CALL_FLAGS_NO_AUTO_START, timeout_ms,
                                       cancellable, error);
}

char *sesame_variant_first_string(GVariant *tuple) {
    GVariant *child = g_variant_get_child_value(tuple, 0);
    char *text = g_variant_dup_string(child, NULL);
    g_variant_unref(child);
    return text;
}

char *sesame_name_owner(GDBusConnection *connection, const char *name, int timeout_ms, GCancellable *cancellable,
                        GError **error) {
    GVariant *reply = call(connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                           "GetNameOwner", g_variant_new("(s)", name), "(s)", timeout_ms, cancellable, error);
    if (reply == NULL) return NULL;
    char *owner = NULL;
    g_variant_get(reply, "(s)", &owner);
    g_variant_unref(reply);
    return owner;
}

guint32 sesame_connection_pid(GDBusConnection *connection, const char *unique_name, int timeout_ms,
                              GCancellable *cancellable, GError **error) {
    GVariant *reply = call(connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                           "GetConnectionUnixProcessID", g_variant_new("(s)", unique_name), "(u)", timeout_ms,
                           cancellable, error);
    if (reply == NULL) return 0;
    guint32 pid = 0;
    g_variant_get(reply, "(u)", &pid);
    g_variant_unref(reply);
    return pid;
}

/// Property `property` of `interface` on the Secret Service object `path`, asked afresh.
static GVariant *secret_property(GDBusConnection *connection, const char *path, const char *interface,
                                 const char *property, int timeout_ms, GCancellable *cancellable, GError **error) {
    GVariant *reply = call(connection, "org.freedesktop.secrets", path, "org.freedesktop.DBus.Properties", "Get",
                           g_variant_new("(ss)", interface, property), "(v)", timeout_ms, cancellable, error);
    if (reply == NULL) return NULL;
    GVariant *value = NULL;
    g_variant_get(reply, "(v)", &value);
    g_variant_unref(reply);
    return value;
}

char *sesame_secret_string_property(GDBusConnection *connection, const char *path, const char *interface,
                                    const char *property, int timeout_ms, GCancellable *cancellable, GError **error) {
    GVariant *value = secret_property(connection, path, interface, property, timeout_ms, cancellable, error);
    if (value == NULL) return NULL;
    char *text = g_variant_is_of_type(value, G_VARIANT_TYPE_STRING) ? g_variant_dup_string(value, NULL) : g_strdup("");
    g_variant_unref(value);
    return text;
}

int sesame_secret_bool_property(GDBusConnection *connection, const char *path, const char *interface,
                                const char *property, int timeout_ms, GCancellable *cancellable, GError **error) {
    GVariant *value = secret_property(connection, path, interface, property, timeout_ms, cancellable, error);
    if (value == NULL) return -1;
    int result = g_variant_is_of_type(value, G_VARIANT_TYPE_BOOLEAN) ? (g_variant_get_boolean(value) ? 1 : 0) : 0;
    g_variant_unref(value);
    return result;
}

gchar **sesame_secret_collections(GDBusConnection *connection, int timeout_ms, GCancellable *cancellable,
                                  GError **error) {
    GVariant *value = secret_property(connection, "/org/freedesktop/secrets", "org.freedesktop.Secret.Service",
                                      "Collections", timeout_ms, cancellable, error);
    if (value == NULL) return NULL;
    gchar **paths = g_variant_is_of_type(value, G_VARIANT_TYPE_OBJECT_PATH_ARRAY) ? g_variant_dup_objv(value, NULL)
                                                                                 : g_new0(gchar *, 1);
    g_variant_unref(value);
    return paths;
}

/// `SearchItems`' parameters, `(a{ss})`, from a table of string attributes: a floating reference.
static GVariant *search_parameters(GHashTable *attributes) {
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

gchar **sesame_collection_search(GDBusConnection *connection, const char *path, GHashTable *attributes,
                                 int timeout_ms, GCancellable *cancellable, GError **error) {
    GVariant *reply = call(connection, "org.freedesktop.secrets", path, "org.freedesktop.Secret.Collection",
                           "SearchItems", search_parameters(attributes), "(ao)", timeout_ms, cancellable, error);
    if (reply == NULL) return NULL;
    GVariant *list = g_variant_get_child_value(reply, 0);
    gchar **paths = g_variant_dup_objv(list, NULL);
    g_variant_unref(list);
    g_variant_unref(reply);
    return paths;
}

gboolean sesame_service_search_paths(GDBusConnection *connection, GHashTable *attributes, int timeout_ms,
                                     GCancellable *cancellable, gchar ***unlocked, gchar ***locked, GError **error) {
    GVariant *reply = call(connection, "org.freedesktop.secrets", "/org/freedesktop/secrets",
                           "org.freedesktop.Secret.Service", "SearchItems", search_parameters(attributes), "(aoao)",
                           timeout_ms, cancellable, error);
    if (reply == NULL) return FALSE;
    GVariant *first = g_variant_get_child_value(reply, 0);
    GVariant *second = g_variant_get_child_value(reply, 1);
    *unlocked = g_variant_dup_objv(first, NULL);
    *locked = g_variant_dup_objv(second, NULL);
    g_variant_unref(first);
    g_variant_unref(second);
    g_variant_unref(reply);
    return TRUE;
}

gboolean sesame_item_properties(GDBusConnection *connection, const char *path, int timeout_ms,
                                GCancellable *cancellable, SesameItemProperties *properties, GError **error) {
    GVariant *reply = call(connection, "org.freedesktop.secrets", path, "org.freedesktop.DBus.Properties", "GetAll",
                           g_variant_new("(s)", "org.freedesktop.Secret.Item"), "(a{sv})", timeout_ms, cancellable,
                           error);
    if (reply == NULL) return FALSE;
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
    g_variant_unref(reply);
    if (properties->label == NULL) properties->label = g_strdup("");
    return TRUE;
}

GHashTable *sesame_item_secrets(SecretService *service, const char *const *paths, int timeout_ms,
                                GCancellable *cancellable, GError **error) {
    const char *session = secret_service_get_session_dbus_path(service);
    if (session == NULL) {
        g_set_error_literal(error, SECRET_ERROR, SECRET_ERROR_PROTOCOL, "no open Secret Service session");
        return NULL;
    }
    GVariant *reply = call(g_dbus_proxy_get_connection(G_DBUS_PROXY(service)), "org.freedesktop.secrets",
                           "/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "GetSecrets",
                           g_variant_new("(^aoo)", paths, session), "(a{o(oayays)})", timeout_ms, cancellable, error);
    if (reply == NULL) return NULL;
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
    g_variant_unref(reply);
    return secrets;
}

SecretValue *sesame_secrets_get(GHashTable *secrets, const char *path) {
    return (SecretValue *)g_hash_table_lookup(secrets, path);
}

SesameFailure sesame_classify_error(const GError *error) {
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

