/// One row of a provider's error table: which errors it matches, and how they are classified.
///
/// Providers keep their error tables as data (a `*Errors.json` file beside their sources) that
/// the `ErrorTableGeneratorPlugin` turns into an ``ErrorRuleTable`` at build time, so the
/// mapping can be read and audited as a table rather than as a `switch`.
public struct ErrorRule: Sendable, Hashable, CustomStringConvertible {
    /// A stable name for the row, unique in its table (for example `oauth-458`).
    public var id: String
    /// Which errors the row matches.
    public var match: ErrorRuleMatch
    /// The category of a matching error.
    public var category: ErrorCategory
    /// The recommended recovery.
    public var recoveryTactic: RecoveryTactic
    /// Whether the person must be shown the message.
    public var shouldNotifyUser: Bool
    /// Whether the error ends the session (and clears its stored token).
    public var closesSession: Bool
    /// Whether an app may recover by logging in again without involving the person. `false`
    /// for errors where the person has to act or be told (Facebook's 458 and 464).
    public var allowsSilentReauthentication: Bool
    /// The key under which a host can replace ``userMessage`` with its own text.
    public var messageKey: String?
    /// The default title for the person, when the row has one.
    public var userTitle: String?
    /// The default message for the person, when the row has one: the error's
    /// ``AuthError/userMessage`` and ``AuthError/contextualMessage``.
    public var userMessage: String?
    /// What the error means, for developers.
    public var meaning: String
    /// Where the rule comes from: a documentation page or SDK source.
    public var source: String

    /// Creates a rule.
    public init(
        id: String, match: ErrorRuleMatch, category: ErrorCategory, recoveryTactic: RecoveryTactic,
        shouldNotifyUser: Bool, closesSession: Bool, allowsSilentReauthentication: Bool = true,
        messageKey: String? = nil, userTitle: String? = nil, userMessage: String? = nil, meaning: String,
        source: String
    ) {
        self.id = id
        self.match = match
        self.category = category
        self.recoveryTactic = recoveryTactic
        self.shouldNotifyUser = shouldNotifyUser
        self.closesSession = closesSession
        self.allowsSilentReauthentication = allowsSilentReauthentication
        self.messageKey = messageKey
        self.userTitle = userTitle
        self.userMessage = userMessage
        self.meaning = meaning
        self.source = source
    }

    public var description: String { "\(id) (\(match)) → \(category)/\(recoveryTactic)" }

    /// The sentence for the person that an error this row classifies carries as its
    /// ``AuthError/contextualMessage``: the row's message, or its category's.
    public var contextualMessage: String { userMessage ?? category.contextualMessage }
}

/// The conditions of an ``ErrorRule``; each one left at its default matches anything.
public struct ErrorRuleMatch: Sendable, Hashable, CustomStringConvertible {
    /// The provider's numeric error code.
    public var code: IntCondition
    /// The provider's numeric error subcode.
    public var subcode: IntCondition
    /// The provider's string error identifiers (OAuth's `error`), any of which matches; `nil`
    /// matches anything.
    public var error: [String]?
    /// The HTTP status.
    public var status: IntCondition
    /// The provider's transient flag; `nil` matches anything, and an absent flag counts as `false`.
    public var isTransient: Bool?

    /// Creates conditions.
    public init(
        code: IntCondition = .any, subcode: IntCondition = .any, error: [String]? = nil, status: IntCondition = .any,
        isTransient: Bool? = nil
    ) {
        self.code = code
        self.subcode = subcode
        self.error = error
        self.status = status
        self.isTransient = isTransient
    }

    /// Whether an error with these facts meets every condition.
    public func matches(_ facts: ErrorFacts) -> Bool {
        code.matches(facts.code) && subcode.matches(facts.subcode) && status.matches(facts.status)
            && (error.map { names in facts.error.map(names.contains) ?? false } ?? true)
            && (isTransient.map { $0 == (facts.isTransient ?? false) } ?? true)
    }

    public var description: String {
        var parts: [String] = []
        if code != .any { parts.append("code \(code)") }
        if subcode != .any { parts.append("subcode \(subcode)") }
        if let error { parts.append("error \(error.joined(separator: ","))") }
        if status != .any { parts.append("status \(status)") }
        if let isTransient { parts.append("transient \(isTransient)") }
        return parts.isEmpty ? "anything" : parts.joined(separator: ", ")
    }
}

/// A condition on an integer that may be missing (a code, a subcode, a status).
public enum IntCondition: Sendable, Hashable, CustomStringConvertible {
    /// Any value, and no value.
    case any
    /// Only no value (the error carried none, or none could be read).
    case absent
    /// A value in one of these ranges.
    case oneOf([ClosedRange<Int>])

    /// Whether `value` meets the condition.
    public func matches(_ value: Int?) -> Bool {
        switch self {
        case .any: true
        case .absent: value == nil
        case .oneOf(let ranges): value.map { value in ranges.contains { $0.contains(value) } } ?? false
        }
    }

    public var description: String {
        switch self {
        case .any: "*"
        case .absent: "none"
        case .oneOf(let ranges):
            ranges.map { $0.count == 1 ? "\($0.lowerBound)" : "\($0.lowerBound)-\($0.upperBound)" }
                .joined(separator: ",")
        }
    }
}

/// What a taxonomy read from a failed response, for matching against an ``ErrorRuleTable``.
public struct ErrorFacts: Sendable, Hashable {
    /// The numeric error code, when one could be read.
    public var code: Int?
    /// The numeric error subcode, when one could be read.
    public var subcode: Int?
    /// The string error identifier (OAuth's `error`), when there is one.
    public var error: String?
    /// The HTTP status, when there was a response.
    public var status: Int?
    /// The provider's transient flag, when it sent one.
    public var isTransient: Bool?

    /// Creates facts.
    public init(
        code: Int? = nil, subcode: Int? = nil, error: String? = nil, status: Int? = nil, isTransient: Bool? = nil
    ) {
        self.code = code
        self.subcode = subcode
        self.error = error
        self.status = status
        self.isTransient = isTransient
    }
}

/// A provider's error table: rules tried in order, the first that matches wins.
///
/// Tables made by the `ErrorTableGeneratorPlugin` end with a rule that matches everything,
/// so ``firstMatch(_:)`` always finds one; the generator refuses a table that does not, or that
/// has a rule an earlier one hides.
public struct ErrorRuleTable: Sendable {
    /// The table's name (its data file's base name, such as `GraphErrors`).
    public var name: String
    /// The rules, in the order they are tried.
    public var rules: [ErrorRule]

    /// The table this one extends (its rules follow this table's own), when it extends one.
    public private(set) var extended: (name: String, count: Int)?

    /// Creates a table.
    public init(name: String, rules: [ErrorRule]) {
        self.name = name
        self.rules = rules
    }

    /// A table of its own `rules` followed by those of `base`. An own rule with a base rule's id
    /// replaces it: the base rule is left out, so that a provider changes what one base row says
    /// (GitHub's 403, 404 or 5xx) in its own place in the order. The base rules named in
    /// `leavingOut` are left out too, so that their errors fall to the rows after them.
    public init(name: String, rules: [ErrorRule], extending base: ErrorRuleTable, leavingOut: Set<String> = []) {
        let own = Set(rules.map(\.id)).union(leavingOut)
        self.init(name: name, rules: rules + base.rules.filter { !own.contains($0.id) })
        self.extended = (base.name, base.rules.count)
        ownRuleCount = rules.count
        baseRuleIDs = base.rules.map(\.id)
    }

    /// How many rules are this table's own (all of them, unless it extends another).
    private var ownRuleCount: Int?
    /// The ids of the extended table's rules, in its order.
    private var baseRuleIDs: [String] = []

    /// Where the first rule named `id` is written: its table's name (this one's, or the base's)
    /// and its 1-based row there.
    public func origin(ofRule id: String) -> (table: String, row: Int)? {
        guard let index = rules.firstIndex(where: { $0.id == id }) else { return nil }
        if let extended, index >= ownRuleCount ?? rules.count, let row = baseRuleIDs.firstIndex(of: id) {
            return (extended.name, row + 1)
        }
        return (name, index + 1)
    }

    /// The base rows every provider's table extends (`BaseErrors.json` in the core): RFC 6749 §5.2,
    /// RFC 6750 §3.1 and RFC 8628 §3.5 codes, then HTTP statuses (429, 401, 403, 404, 409, 5xx,
    /// other 4xx), then a row for anything. A table whose data file says `"extends": "base"` is
    /// its own rows followed by these.
    public static var base: ErrorRuleTable { BaseErrors.table }

    /// The first rule that matches `facts`, if any.
    public func firstMatch(_ facts: ErrorFacts) -> ErrorRule? { rules.first { $0.match.matches(facts) } }

    /// The rule named `id`, if the table has one.
    public func rule(id: String) -> ErrorRule? { rules.first { $0.id == id } }
}

/// Which row of a provider's error table classified an ``AuthError``: attached by every
/// table-driven taxonomy, and read through ``AuthError/ruleID``, ``AuthError/messageKey`` and
/// ``AuthError/allowsSilentReauthentication``.
public struct ErrorRuleDetails: ProviderErrorDetails, Hashable {
    /// The ``ErrorRule/id`` of the row.
    public var ruleID: String
    /// The row's ``ErrorRule/messageKey``.
    public var messageKey: String?
    /// The row's ``ErrorRule/allowsSilentReauthentication``.
    public var allowsSilentReauthentication: Bool

    /// Creates the details.
    public init(ruleID: String, messageKey: String? = nil, allowsSilentReauthentication: Bool = true) {
        self.ruleID = ruleID
        self.messageKey = messageKey
        self.allowsSilentReauthentication = allowsSilentReauthentication
    }

    /// The details of `rule`.
    public init(_ rule: ErrorRule) {
        self.init(
            ruleID: rule.id, messageKey: rule.messageKey,
            allowsSilentReauthentication: rule.allowsSilentReauthentication)
    }

    public var json: JSONValue {
        var object: [String: JSONValue] = [
            "rule": .string(ruleID), "allowsSilentReauthentication": .bool(allowsSilentReauthentication),
        ]
        if let messageKey { object["messageKey"] = .string(messageKey) }
        return .object(object)
    }

    /// The same details: they come from the table, never from a request.
    public func redacting(_ secrets: [String]) -> ErrorRuleDetails { self }
}

extension ErrorRule {
    /// The rule a table-driven taxonomy uses if its table ever matches nothing (the generator
    /// makes sure a table's last row matches everything, so a generated table never does).
    public static let lastResort = ErrorRule(
        id: "other", match: ErrorRuleMatch(), category: .providerOther, recoveryTactic: .showMessage,
        shouldNotifyUser: false, closesSession: false, meaning: "An error no rule describes.", source: "Sesame")
}

extension ErrorRuleTable {
    /// The first rule that matches `facts`, or ``ErrorRule/lastResort``.
    public func classifying(_ facts: ErrorFacts) -> ErrorRule { firstMatch(facts) ?? .lastResort }
}

extension AuthError {
    /// An error as `rule` classifies it: the rule's category, tactic, notification flag, texts
    /// for the person (its message is also the ``AuthError/contextualMessage``) and whether it
    /// closes the session, with ``ErrorRuleDetails`` attached.
    /// The taxonomy then adds what only the response says (status, body, a wait).
    public init(rule: ErrorRule, message: String, provider: ProviderID?) {
        self.init(
            category: rule.category, message: message, shouldNotifyUser: rule.shouldNotifyUser,
            userTitle: rule.userTitle, userMessage: rule.userMessage, contextualMessage: rule.contextualMessage,
            recoveryTactic: rule.recoveryTactic,
            closesSession: rule.closesSession, provider: provider, details: [ErrorRuleDetails(rule)])
    }

    /// The id of the error-table row that classified this error, when a table did.
    public var ruleID: String? { details(as: ErrorRuleDetails.self)?.ruleID }

    /// The key under which a host may replace this error's message, when its row has one.
    public var messageKey: String? { details(as: ErrorRuleDetails.self)?.messageKey }

    /// Whether the app may recover by logging in again without involving the person. `true`
    /// unless the classifying row says otherwise.
    public var allowsSilentReauthentication: Bool {
        details(as: ErrorRuleDetails.self)?.allowsSilentReauthentication ?? true
    }
}
