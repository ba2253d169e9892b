#ifndef SESAME_CCURL_SHIM_H
#define SESAME_CCURL_SHIM_H

// libcurl for Swift, loaded when first used rather than when the program starts.
//
// libcurl.so.4 brings about thirty libraries with it (TLS, LDAP, SSH, Kerberos, IDN, HTTP/2, ...),
// whose loading and constructors cost a process about 8 ms of CPU at start, more than a whole
// `secret-tool lookup`. Most `sesame` commands (`token`, `--help`, `switch`) never make an HTTP
// request, so the program is not linked against libcurl: the first call here opens it with
// dlopen and resolves the functions Sesame uses, once, thread-safely. Swift calls the
// `sesame_curl_*` functions below instead of libcurl's own names.
//
// curl_easy_setopt, curl_easy_getinfo, curl_multi_setopt and curl_share_setopt are variadic, which
// Swift cannot call, so each gets one typed wrapper per argument type.

#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

// MARK: Loading

/// libcurl's functions as Sesame uses them, resolved from libcurl.so.4.
typedef struct sesame_curl_api {
    /// NULL once everything is resolved; otherwise why libcurl cannot be used.
    const char *failure;
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *handle);
    CURLcode (*easy_perform)(CURL *handle);
    const char *(*easy_strerror)(CURLcode code);
    CURLcode (*easy_setopt)(CURL *handle, CURLoption option, ...);
    CURLcode (*easy_getinfo)(CURL *handle, CURLINFO info, ...);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *handle);
    CURLMcode (*multi_add_handle)(CURLM *multi, CURL *easy);
    CURLMcode (*multi_remove_handle)(CURLM *multi, CURL *easy);
    CURLMcode (*multi_socket_action)(CURLM *multi, curl_socket_t socket, int mask, int *running);
    CURLMsg *(*multi_info_read)(CURLM *multi, int *queued);
    const char *(*multi_strerror)(CURLMcode code);
    CURLMcode (*multi_setopt)(CURLM *handle, CURLMoption option, ...);
    CURLSH *(*share_init)(void);
    CURLSHcode (*share_cleanup)(CURLSH *handle);
    CURLSHcode (*share_setopt)(CURLSH *handle, CURLSHoption option, ...);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *text);
    void (*slist_free_all)(struct curl_slist *list);
    curl_version_info_data *(*version_info)(CURLversion version);
} sesame_curl_api;

static inline sesame_curl_api *sesame_curl_storage(void) {
    static sesame_curl_api api;
    return &api;
}

static inline void sesame_curl_load(void) {
    sesame_curl_api *api = sesame_curl_storage();
    // The soname of libcurl 7.16 and later, whichever TLS library it was built with.
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        api->failure = "libcurl.so.4 could not be loaded; install libcurl (Debian and Ubuntu: apt install libcurl4)";
        return;
    }
    int missing = 0;
#define SESAME_CURL_RESOLVE(field, name)                                                                        \
    do {                                                                                                        \
        *(void **)(&api->field) = dlsym(library, name);                                                         \
        if (api->field == NULL) missing = 1;                                                                    \
    } while (0)
    SESAME_CURL_RESOLVE(global_init, "curl_global_init");
    SESAME_CURL_RESOLVE(easy_init, "curl_easy_init");
    SESAME_CURL_RESOLVE(easy_cleanup, "curl_easy_cleanup");
    SESAME_CURL_RESOLVE(easy_perform, "curl_easy_perform");
    SESAME_CURL_RESOLVE(easy_strerror, "curl_easy_strerror");
    SESAME_CURL_RESOLVE(easy_setopt, "curl_easy_setopt");
    SESAME_CURL_RESOLVE(easy_getinfo, "curl_easy_getinfo");
    SESAME_CURL_RESOLVE(multi_init, "curl_multi_init");
    SESAME_CURL_RESOLVE(multi_cleanup, "curl_multi_cleanup");
    SESAME_CURL_RESOLVE(multi_add_handle, "curl_multi_add_handle");
    SESAME_CURL_RESOLVE(multi_remove_handle, "curl_multi_remove_handle");
    SESAME_CURL_RESOLVE(multi_socket_action, "curl_multi_socket_action");
    SESAME_CURL_RESOLVE(multi_info_read, "curl_multi_info_read");
    SESAME_CURL_RESOLVE(multi_strerror, "curl_multi_strerror");
    SESAME_CURL_RESOLVE(multi_setopt, "curl_multi_setopt");
    SESAME_CURL_RESOLVE(share_init, "curl_share_init");
    SESAME_CURL_RESOLVE(share_cleanup, "curl_share_cleanup");
    SESAME_CURL_RESOLVE(share_setopt, "curl_share_setopt");
    SESAME_CURL_RESOLVE(slist_append, "curl_slist_append");
    SESAME_CURL_RESOLVE(slist_free_all, "curl_slist_free_all");
    SESAME_CURL_RESOLVE(version_info, "curl_version_info");
#undef SESAME_CURL_RESOLVE
    if (missing) {
        api->failure = "the libcurl.so.4 found lacks functions Sesame needs; install libcurl 7.88 or later";
        return;
    }
    if (api->global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        api->failure = "curl_global_init failed; libcurl cannot be used in this process";
    }
}

/// libcurl, loaded and initialised (curl_global_init) on the first call.
static inline const sesame_curl_api *sesame_curl(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, sesame_curl_load);
    return sesame_curl_storage();
}

/// NULL when libcurl is loaded and initialised; otherwise why it cannot be used. Call it (through
/// CurlGlobal) before any other function here: they assume libcurl is there.
static inline const char *sesame_curl_failure(void) { return sesame_curl()->failure; }

// MARK: Functions without variable arguments

static inline CURL *sesame_curl_easy_init(void) { return sesame_curl()->easy_init(); }
static inline void sesame_curl_easy_cleanup(CURL *handle) { sesame_curl()->easy_cleanup(handle); }
static inline CURLcode sesame_curl_easy_perform(CURL *handle) { return sesame_curl()->easy_perform(handle); }
static inline const char *sesame_curl_easy_strerror(CURLcode code) { return sesame_curl()->easy_strerror(code); }
static inline CURLM *sesame_curl_multi_init(void) { return sesame_curl()->multi_init(); }
static inline CURLMcode sesame_curl_multi_cleanup(CURLM *handle) { return sesame_curl()->multi_cleanup(handle); }
static inline CURLMcode sesame_curl_multi_add_handle(CURLM *multi, CURL *easy) {
    return sesame_curl()->multi_add_handle(multi, easy);
}
static inline CURLMcode sesame_curl_multi_remove_handle(CURLM *multi, CURL *easy) {
    return sesame_curl()->multi_remove_handle(multi, easy);
}
static inline CURLMcode sesame_curl_multi_socket_action(CURLM *multi, curl_socket_t socket, int mask, int *running) {
    return sesame_curl()->multi_socket_action(multi, socket, mask, running);
}
static inline CURLMsg *sesame_curl_multi_info_read(CURLM *multi, int *queued) {
    return sesame_curl()->multi_info_read(multi, queued);
}
static inline const char *sesame_curl_multi_strerror(CURLMcode code) { return sesame_curl()->multi_strerror(code); }
static inline CURLSH *sesame_curl_share_init(void) { return sesame_curl()->share_init(); }
static inline CURLSHcode sesame_curl_share_cleanup(CURLSH *handle) { return sesame_curl()->share_cleanup(handle); }
static inline struct curl_slist *sesame_curl_slist_append(struct curl_slist *list, const char *text) {
    return sesame_curl()->slist_append(list, text);
}
static inline void sesame_curl_slist_free_all(struct curl_slist *list) { sesame_curl()->slist_free_all(list); }

/// The C type of CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION callbacks.
typedef size_t (*sesame_curl_data_callback)(char *data, size_t size, size_t count, void *userdata);

// MARK: curl_easy_setopt

static inline CURLcode sesame_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return sesame_curl()->easy_setopt(handle, option, value);
}

static inline CURLcode sesame_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return sesame_curl()->easy_setopt(handle, option, value);
}

/// For string options; libcurl copies the string (except CURLOPT_POSTFIELDS, which is a pointer option here).
static inline CURLcode sesame_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return sesame_curl()->easy_setopt(handle, option, value);
}

/// For object and data pointers: CURLOPT_WRITEDATA, CURLOPT_ERRORBUFFER, CURLOPT_SHARE, CURLOPT_POSTFIELDS, ...
static inline CURLcode sesame_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return sesame_curl()->easy_setopt(handle, option, value);
}

static inline CURLcode sesame_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return sesame_curl()->easy_setopt(handle, option, value);
}

static inline CURLcode sesame_easy_setopt_data_callback(CURL *handle, CURLoption option,
                                                        sesame_curl_data_callback callback) {
    return sesame_curl()->easy_setopt(handle, option, callback);
}

/// The C type of CURLOPT_OPENSOCKETFUNCTION callbacks: opens a socket for a connection.
typedef curl_socket_t (*sesame_curl_open_socket_callback)(void *clientp, curlsocktype purpose,
                                                          struct curl_sockaddr *address);

static inline CURLcode sesame_easy_setopt_open_socket_callback(CURL *handle,
                                                               sesame_curl_open_socket_callback callback) {
    return sesame_curl()->easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, callback);
}

/// CURL_SOCKET_BAD, what an open-socket callback returns when it could not open one.
static inline curl_socket_t sesame_curl_socket_bad(void) { return CURL_SOCKET_BAD; }

/// The C type of CURLOPT_CLOSESOCKETFUNCTION callbacks: closes a socket libcurl is done with.
typedef int (*sesame_curl_close_socket_callback)(void *clientp, curl_socket_t socket);

static inline CURLcode sesame_easy_setopt_close_socket_callback(CURL *handle,
                                                                sesame_curl_close_socket_callback callback) {
    return sesame_curl()->easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, callback);
}

// MARK: curl_easy_getinfo

static inline CURLcode sesame_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return sesame_curl()->easy_getinfo(handle, info, value);
}

/// The certificate chain a transfer met (CURLOPT_CERTINFO), or NULL: owned by the handle.
static inline struct curl_certinfo *sesame_easy_getinfo_certinfo(CURL *handle) {
    struct curl_certinfo *info = NULL;
    if (sesame_curl()->easy_getinfo(handle, CURLINFO_CERTINFO, &info) != CURLE_OK) return NULL;
    return info;
}

/// The fields of certificate `index` of `info` ("Subject:...", "Issuer:...", one a line).
static inline struct curl_slist *sesame_certinfo_fields(struct curl_certinfo *info, int index) {
    return info->certinfo[index];
}

// MARK: curl_multi_setopt

static inline CURLMcode sesame_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return sesame_curl()->multi_setopt(handle, option, value);
}

static inline CURLMcode sesame_multi_setopt_pointer(CURLM *handle, CURLMoption option, void *value) {
    return sesame_curl()->multi_setopt(handle, option, value);
}

/// The C type of CURLMOPT_SOCKETFUNCTION callbacks: which events libcurl wants on a socket.
typedef int (*sesame_curl_socket_callback)(CURL *easy, curl_socket_t socket, int what, void *userp, void *socketp);

/// The C type of CURLMOPT_TIMERFUNCTION callbacks: when libcurl next needs a timeout action.
typedef int (*sesame_curl_timer_callback)(CURLM *multi, long timeout_ms, void *userp);

static inline CURLMcode sesame_multi_setopt_socket_callback(CURLM *handle, sesame_curl_socket_callback callback) {
    return sesame_curl()->multi_setopt(handle, CURLMOPT_SOCKETFUNCTION, callback);
}

static inline CURLMcode sesame_multi_setopt_timer_callback(CURLM *handle, sesame_curl_timer_callback callback) {
    return sesame_curl()->multi_setopt(handle, CURLMOPT_TIMERFUNCTION, callback);
}

/// CURL_SOCKET_TIMEOUT, for curl_multi_socket_action when a timeout (not a socket) is due.
static inline curl_socket_t sesame_curl_socket_timeout(void) { return CURL_SOCKET_TIMEOUT; }

// MARK: curl_share_setopt

/// For CURLSHOPT_SHARE and CURLSHOPT_UNSHARE, whose argument is a curl_lock_data.
static inline CURLSHcode sesame_share_setopt_long(CURLSH *handle, CURLSHoption option, long value) {
    return sesame_curl()->share_setopt(handle, option, value);
}

// MARK: Version

/// libcurl's version number as text, such as "7.88.1" (CURLVERSION_NOW is a macro Swift cannot see).
static inline const char *sesame_curl_version_number(void) {
    return sesame_curl()->version_info(CURLVERSION_NOW)->version;
}

// MARK: CURLMsg (its union is awkward from Swift)

/// Whether `message` says a transfer finished (CURLMSG_DONE).
static inline int sesame_multi_message_is_done(const CURLMsg *message) {
    return message->msg == CURLMSG_DONE;
}

/// The easy handle `message` is about.
static inline CURL *sesame_multi_message_handle(const CURLMsg *message) {
    return message->easy_handle;
}

/// The result of the finished transfer `message` is about.
static inline CURLcode sesame_multi_message_result(const CURLMsg *message) {
    return message->data.result;
}

#endif
