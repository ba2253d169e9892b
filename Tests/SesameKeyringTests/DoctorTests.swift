import Foundation
import Sesame
import SesameTestSupport
import Testing

@testable import SesameKeyring

/// `sesame doctor`'s keyring lines come from ``SecretServiceInfo``: they name the program that
/// provides the Secret Service and give that program's advice.
@Suite(
    "sesame doctor and the Secret Service that answers",
    .enabled(if: KeyringTestSupport.keyringPromised, KeyringTestSupport.keyringSkipReason))
struct DoctorTests {
    @Test("doctor names the service that owns org.freedesktop.secrets, not always GNOME's")
    func doctorNamesTheService() async throws {
        let scratch = try KeyringTestSupport.scratchDirectory()
        defer { try? FileManager.default.removeItem(at: scratch) }
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SESAME_") }
        for name in ["XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"] {
            environment[name] = scratch.appending(path: name).path
        }
        environment["LANG"] = "C.UTF-8"
        let result = try await ProcessRunner.run(
            try ProcessRunner.builtExecutable("sesame"), ["doctor"], environment: environment, killAfter: .seconds(60))
        #expect(!result.wasKilled)
        let service = KeyringTestSupport.service
        let name = service.kind == .keePassXC ? "KeePassXC" : "GNOME Keyring"
        #expect(
            result.standardOutput.contains("Secret Service (org.freedesktop.secrets) is provided by \(name) (pid "),
            "\(result.standardOutput)")
        #expect(
            result.standardOutput.contains(
                "The default collection “\(service.defaultCollection)” of \(name) is unlocked."),
            "\(result.standardOutput)")
    }

    @Test("each service gets its own advice for unlocking and for a missing default collection")
    func adviceIsTheService() {
        let keePassXC = SecretServiceProvider(processName: "keepassxc", processID: 42)
        #expect(keePassXC.kind == .keePassXC)
        #expect(keePassXC.description == "KeePassXC (pid 42)")
        #expect(keePassXC.unlockAdvice.contains("KeePassXC window"))
        #expect(!keePassXC.unlockAdvice.contains("Passwords and Keys"))
        let gnome = SecretServiceProvider(processName: "gnome-keyring-d", processID: 7)
        #expect(gnome.kind == .gnomeKeyring)
        #expect(gnome.unlockAdvice.contains("Passwords and Keys"))
        #expect(SecretServiceProvider(processName: "kwalletd6", processID: nil).kind == .kWallet)
        #expect(SecretServiceProvider(processName: "ksecretd", processID: nil).kind == .kWallet)
        let other = SecretServiceProvider(processName: "oo7-daemon", processID: nil)
        #expect(other.kind == .other)
        #expect(other.name == "oo7-daemon")

        let locked = SecretServiceInfo(provider: keePassXC, defaultCollection: "Passwords", isLocked: true)
        #expect(
            locked.findings.last
                == .init(
                    .warning, "The default collection “Passwords” of KeePassXC is locked.", fix: keePassXC.unlockAdvice)
        )
        let none = SecretServiceInfo(provider: keePassXC, defaultCollection: nil, isLocked: false)
        #expect(none.findings.last?.fix?.contains("Secret Service Integration") == true)
        #expect(
            SecretServiceInfo(provider: nil, defaultCollection: nil, isLocked: false).findings.first?.level == .problem)
    }

    @Test("with no default collection, the message is whole: the key quoted, then the service's own advice")
    func noDefaultCollectionMessage() {
        let key = CredentialKey(provider: "facebook", appID: "1234567890123456", account: "default")
        let keePassXC = SecretServiceProvider(processName: "keepassxc", processID: 42)
        let message = KeyringMessages.noDefaultCollection(key, keePassXC).message
        #expect(message.contains("the credential for “facebook (app 1234567890123456) — default” could not be saved"))
        #expect(!message.contains("— default in."))
        #expect(message.hasSuffix("then try again."))
        #expect(message.contains(keePassXC.defaultCollectionAdvice))
        #expect(!message.contains("Passwords and Keys"))
    }
}
