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

    /// The tactics each category allows (`ErrorCategory.allowedTactics` in the Sesame core, which
    /// a test keeps equal to this), and those it allows only in a row whose `notify` is true: the
    /// person must act outside the app first (Facebook's 459, a checkpointed account).
    package static let tacticsOfCategory: [String: (always: [String], withNotify: [String])] = [
        "invalid": (["showMessage", "none"], []),
        "retry": (["retry", "retryAfterBackoff"], ["showMessage"]),
        "authenticationReopenSession": (["reauthenticate"], []),
        "permissions": (["requestPermissions"], ["showMessage"]),
        "server": (["showMessage", "retryAfterBackoff", "retry"], []),
        "throttling": (["retryAfterBackoff"], []),
        "userCancelled": (["none"], []),
        "providerOther": (["showMessage"], []),
        "badRequest": (["showMessage"], []),
    ]

    /// Why a row with `category`, `tactic` and `notify` contradicts itself (the tactic is not one
    /// its category allows), or `nil` when it does not.
    package static func contradiction(category: String, tactic: String, notify: Bool) -> String? {
        guard let allowed = tacticsOfCategory[category] else { return nil }
        if allowed.always.contains(tactic) || (notify && allowed.withNotify.contains(tactic)) { return nil }
        if allowed.withNotify.contains(tactic) {
            return "category '\(category)' allows tactic '\(tactic)' only with \"notify\": true (the person must act "
                + "outside the app before a retry can work); set \"notify\" and a \"message\" that says what to do, "
                + "or use tactic \(allowed.always.map { "'\($0)'" }.joined(separator: " or "))"
        }
        var allowedText = allowed.always.map { "'\($0)'" }.joined(separator: ", ")
        if !allowed.withNotify.isEmpty {
            let withNotify = allowed.withNotify.map { "'\($0)'" }.joined(separator: ", ")
            allowedText += " (and \(withNotify) with \"notify\": true)"
        }
        return "category '\(category)' does not allow tactic '\(tactic)': an app that follows the tactic would "
            + "contradict what the category tells it to do; category '\(category)' allows \(allowedText). Change the "
            + "tactic, or the category to one whose guidance matches the tactic"
    }

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
