/// The columns of an error table and the names they accept.
package enum ErrorTableSchema {
    /// `ErrorCategory` case names in the Sesame core, in declaration order.
    package static let categories = [
        "invalid", "retry", "authenticationReopenSession", "permissions", "server", "throttling", "userCancelled",
        "providerOther", "badRequest",
    ]

    /// `RecoveryTactic` case names in the Sesame core, in declaration order.
    package static let tactics = [
        "none", "reauthenticate", "requestPermissions", "retry", "retryAfterBackoff", "showMessage",
    ]

    /// Every column a row may have, with whether it is required and what it holds.
    package static let columns: [(name: String, required: Bool, meaning: String)] = [
        ("id", true, "a name for the row, unique in the table: letters, digits, '.', '_' and '-'"),
        ("code", false, "the error code: \"*\" (the default), \"none\", or values and ranges such as \"10, 200-299\""),
        ("subcode", false, "the error subcode, written like code"),
        ("status", false, "the HTTP status, written like code"),
        ("error", false, "a string error identifier (OAuth's `error`), or an array of them"),
        ("transient", false, "the provider's transient flag (an absent flag counts as false)"),
        ("category", true, "an ErrorCategory case name: \(categories.joined(separator: ", "))"),
        ("tactic", true, "a RecoveryTactic case name: \(tactics.joined(separator: ", "))"),
        ("notify", true, "whether the person must be shown the message"),
        ("closesSession", true, "whether the error ends the session and clears its stored token"),
        ("silentReauthentication", false, "false when the app must not log in again without the person (default true)"),
        ("messageKey", false, "the key a host uses to replace the message; required with message"),
        ("title", false, "a default title for the person"),
        ("message", false, "the default message for the person; required when notify is true"),
        ("meaning", true, "what the error means, for developers"),
        ("source", true, "where the rule comes from: a documentation page or SDK source"),
        ("comment", false, "a note for readers of the table; ignored"),
    ]
}
