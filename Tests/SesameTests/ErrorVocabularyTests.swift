import Foundation
import Sesame
import Testing

@Suite("Error categories and recovery tactics: extensible, with stable spellings")
struct ErrorVocabularyTests {
    @Test("categories and tactics are written as the names they always had", arguments: ErrorCategory.allCases)
    func categorySpelling(_ category: ErrorCategory) throws {
        let written = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode([category]))
        #expect(written == .array([.string(category.rawValue)]))
        #expect(try JSONDecoder().decode([ErrorCategory].self, from: JSONEncoder().encode([category])) == [category])
    }

    @Test("the categories and tactics this version defines are listed once each, in their old order")
    func knownValues() {
        #expect(
            ErrorCategory.allCases.map(\.rawValue) == [
                "invalid", "retry", "authenticationReopenSession", "permissions", "server", "throttling",
                "userCancelled", "providerOther", "badRequest",
            ])
        #expect(
            RecoveryTactic.allCases.map(\.rawValue) == [
                "none", "reauthenticate", "requestPermissions", "retry", "retryAfterBackoff", "showMessage",
            ])
    }

    @Test("a category a later version adds decodes, and its default tactic is to show a message")
    func laterCategory() throws {
        let later = try JSONDecoder().decode([ErrorCategory].self, from: Data(#"["quotaExceeded"]"#.utf8))
        #expect(later == [ErrorCategory(rawValue: "quotaExceeded")])
        #expect(!ErrorCategory.allCases.contains(later[0]))
        #expect(later[0].defaultTactic == .showMessage)
        #expect(ErrorCategory.throttling.defaultTactic == .retryAfterBackoff)
        #expect(ErrorCategory.userCancelled.defaultTactic == RecoveryTactic.none)
    }

    @Test("a tactic a later version adds makes the recovery policy show the message, as showMessage does")
    func laterTactic() {
        let error = AuthError(
            category: .server, message: "m", shouldNotifyUser: true, userMessage: "Try again tomorrow.",
            recoveryTactic: RecoveryTactic(rawValue: "waitForTomorrow"))
        let policy = RecoveryPolicy()
        var known = error
        known.recoveryTactic = .showMessage
        #expect(policy.decide(for: error, attempt: 1) == policy.decide(for: known, attempt: 1))
    }
}
