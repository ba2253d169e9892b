#ifndef SESAME_CCURL_SHIM_H
#define SESAME_CCURL_SHIM_H

// libcurl for Swift. curl_easy_setopt, curl_easy_getinfo, curl_multi_setopt and curl_share_setopt
// are variadic, which Swift cannot call, so each gets one typed wrapper per argument type.
// Everything else in libcurl is imported as it is.

#include <curl/curl.h>
#include <stddef.h>

/// The C type of CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION callbacks.
typedef size_t (*sesame_curl_data_callback)(char *data, size_t size, size_t count, void *userdata);

// MARK: curl_easy_setopt

static inline CURLcode sesame_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode sesame_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/// For string options; libcurl copies the string (except CURLOPT_POSTFIELDS, which is a pointer option here).
static inline CURLcode sesame_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

/// For object and data pointers: CURLOPT_WRITEDATA, CURLOPT_ERRORBUFFER, CURLOPT_SHARE, CURLOPT_POSTFIELDS, ...
static inline CURLcode sesame_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode sesame_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode sesame_easy_setopt_data_callback(CURL *handle, CURLoption option,
                                                        sesame_curl_data_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

// MARK: curl_easy_getinfo

static inline CURLcode sesame_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

// MARK: curl_multi_setopt

static inline CURLMcode sesame_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

static inline CURLMcode sesame_multi_setopt_pointer(CURLM *handle, CURLMoption option, void *value) {
    return curl_multi_setopt(handle, option, value);
}

/// The C type of CURLMOPT_SOCKETFUNCTION callbacks: which events libcurl wants on a socket.
typedef int (*sesame_curl_socket_callback)(CURL *easy, curl_socket_t socket, int what, void *userp, void *socketp);

/// The C type of CURLMOPT_TIMERFUNCTION callbacks: when libcurl next needs a timeout action.
typedef int (*sesame_curl_timer_callback)(CURLM *multi, long timeout_ms, void *userp);

static inline CURLMcode sesame_multi_setopt_socket_callback(CURLM *handle, sesame_curl_socket_callback callback) {
    return curl_multi_setopt(handle, CURLMOPT_SOCKETFUNCTION, callback);
}

static inline CURLMcode sesame_multi_setopt_timer_callback(CURLM *handle, sesame_curl_timer_callback callback) {
    return curl_multi_setopt(handle, CURLMOPT_TIMERFUNCTION, callback);
}

/// CURL_SOCKET_TIMEOUT, for curl_multi_socket_action when a timeout (not a socket) is due.
static inline curl_socket_t sesame_curl_socket_timeout(void) { return CURL_SOCKET_TIMEOUT; }

// MARK: curl_share_setopt

/// For CURLSHOPT_SHARE and CURLSHOPT_UNSHARE, whose argument is a curl_lock_data.
static inline CURLSHcode sesame_share_setopt_long(CURLSH *handle, CURLSHoption option, long value) {
    return curl_share_setopt(handle, option, value);
}

// MARK: Version

/// libcurl's version number as text, such as "7.88.1" (CURLVERSION_NOW is a macro Swift cannot see).
static inline const char *sesame_curl_version_number(void) {
    return curl_version_info(CURLVERSION_NOW)->version;
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
