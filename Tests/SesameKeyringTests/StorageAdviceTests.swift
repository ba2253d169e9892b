import Foundation
import Sesame
import Testing

@testable import SesameKeyring

/// What the keyring module says when the keyring cannot be had: the way out is the file store,
/// named as the storage policy a program chooses, never as a flag of the `sesame` command (which
/// adds its own).
@Suite("The keyring's advice names the storage policy, not a command-line flag")
struct StorageAdviceTests {
    /// One text of the module and where it comes from.
    struct Advice: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var text: String
    }

    static let advice: [Advice] = [
        Advice(
            testDescription: "no session bus",
            text: KeyringMessages.noSessionBus("saving the login", detail: "no bus (test)").message),
        Advice(
            testDescription: "no Secret Service",
            text: KeyringMessages.noSecretService("saving the login", detail: "no owner (test)").message),
        Advice(
            testDescription: "a Secret Service that refuses a session",
            text: KeyringMessages.storeError(
                LibSecretError(stage: .service, failure: .other, message: "refused (test)"), "saving the login",
                .seconds(3)
            ).message),
        Advice(
            testDescription: "the diagnosis of a bus without a Secret Service",
            text: SecretServiceInfo(provider: nil, defaultCollection: nil, isLocked: false).findings[0].fix ?? ""),
    ]

    @Test("it names the `file` storage policy and no option outside a quoted command", arguments: advice)
    func namesThePolicy(_ advice: Advice) {
        #expect(advice.text.contains("storage policy"), "\(advice.text)")
        #expect(advice.text.contains("`file`"), "\(advice.text)")
        // Other programs' commands are quoted in backticks (`dbus-run-session -- <command>`).
        let unquoted = advice.text.split(separator: "`", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 0 }.map(\.element).joined(separator: " ")
        #expect(!unquoted.contains(/--[a-z]/), "\(advice.text)")
        #expect(!advice.text.contains("sesame "), "\(advice.text)")
    }

    @Test("the diagnosis marks its advice as offering the file store, so that a program can add its own switch")
    func findingIsMarked() {
        let findings = SecretServiceInfo(provider: nil, defaultCollection: nil, isLocked: false).findings
        #expect(findings.map(\.suggestsFileStore) == [true])
        let provider = SecretServiceProvider(processName: "keepassxc", processID: 42)
        let locked = SecretServiceInfo(provider: provider, defaultCollection: "Passwords", isLocked: true).findings
        #expect(locked.allSatisfy { !$0.suggestsFileStore })
    }
}
