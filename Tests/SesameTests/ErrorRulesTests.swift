import Testing

@testable import Sesame

@Suite("Error rule tables")
struct ErrorRulesTests {
    func rule(_ id: String, _ match: ErrorRuleMatch, _ category: ErrorCategory) -> ErrorRule {
        ErrorRule(
            id: id, match: match, category: category, recoveryTactic: category.defaultTactic, shouldNotifyUser: false,
            closesSession: false, meaning: id, source: "test")
    }

    @Test(
        "integer conditions match values, ranges and absence",
        arguments: [
            (IntCondition.any, nil, true), (.any, 5, true), (.absent, nil, true), (.absent, 5, false),
            (.oneOf([1...1, 200...299]), 1, true), (.oneOf([1...1, 200...299]), 250, true),
            (.oneOf([1...1, 200...299]), 300, false), (.oneOf([1...1]), nil, false),
        ] as [(IntCondition, Int?, Bool)])
    func intConditions(condition: IntCondition, value: Int?, matches: Bool) {
        #expect(condition.matches(value) == matches)
    }

    @Test("the first matching rule wins, in table order")
    func firstMatchWins() {
        let table = ErrorRuleTable(
            name: "T",
            rules: [
                rule(
                    "specific", ErrorRuleMatch(code: .oneOf([190...190]), subcode: .oneOf([458...458])),
                    .authenticationReopenSession),
                rule("code", ErrorRuleMatch(code: .oneOf([190...190])), .retry),
                rule("oauth", ErrorRuleMatch(error: ["invalid_grant", "invalid_token"]), .authenticationReopenSession),
                rule("transient", ErrorRuleMatch(isTransient: true), .retry),
                rule("5xx", ErrorRuleMatch(code: .absent, status: .oneOf([500...599])), .server),
                rule("rest", ErrorRuleMatch(), .providerOther),
            ])
        #expect(table.firstMatch(ErrorFacts(code: 190, subcode: 458))?.id == "specific")
        #expect(table.firstMatch(ErrorFacts(code: 190, subcode: 460))?.id == "code")
        #expect(table.firstMatch(ErrorFacts(error: "invalid_token"))?.id == "oauth")
        #expect(table.firstMatch(ErrorFacts(error: "access_denied"))?.id == "rest")
        #expect(table.firstMatch(ErrorFacts(code: 9, isTransient: true))?.id == "transient")
        #expect(table.firstMatch(ErrorFacts(code: 9, isTransient: false))?.id == "rest")
        #expect(table.firstMatch(ErrorFacts(status: 503))?.id == "5xx")
        #expect(table.firstMatch(ErrorFacts(code: 9, status: 503))?.id == "rest")
        #expect(table.rule(id: "oauth")?.category == .authenticationReopenSession)
    }

    @Test("an error's rule id, message key and silent-reauthentication flag are read from its rule details")
    func accessors() {
        var error = AuthError(category: .authenticationReopenSession, message: "m")
        #expect(error.ruleID == nil)
        #expect(error.messageKey == nil)
        #expect(error.allowsSilentReauthentication)
        error.attach(ErrorRuleDetails(ruleID: "oauth-458", messageKey: "k", allowsSilentReauthentication: false))
        #expect(error.ruleID == "oauth-458")
        #expect(error.messageKey == "k")
        #expect(!error.allowsSilentReauthentication)
    }
}
