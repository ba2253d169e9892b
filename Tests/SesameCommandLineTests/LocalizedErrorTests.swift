import Foundation
import Sesame
import SesameCommandLine
import SesameDesktop
import SesameEmulator
import SesameHTTPServer
import SesameOIDC
import Testing

/// Every public error reads as a sentence through `localizedDescription`, the property an app
/// prints without knowing the type, not as Foundation's "The operation could not be completed".
@Suite("Errors read as sentences through localizedDescription")
struct LocalizedErrorTests {
    init() { TestProviders.bootstrap() }

    /// One error and the sentence a person should read for it.
    struct Example: Sendable, CustomTestStringConvertible {
        var error: any Error & Sendable
        var sentence: String
        /// Which of several examples of one type this is.
        var note: String?
        var testDescription: String { "\(type(of: error))" + (note.map { ": \($0)" } ?? "") }

        init(_ error: any Error & Sendable, _ sentence: String, note: String? = nil) {
            self.error = error
            self.sentence = sentence
            self.note = note
        }
    }

    static let timeout = TransportError(
        kind: .timedOut, message: "no answer within 10 s", host: "graph.facebook.com")

    static let examples: [Example] = [
        Example(
            AuthError(category: .server, message: "Facebook answered HTTP 500; try again later.", httpStatus: 500),
            "Facebook answered HTTP 500; try again later.", note: "the message"),
        Example(
            AuthError(
                category: .authenticationReopenSession, message: "Facebook refused the token (code 190/460).",
                shouldNotifyUser: true, userMessage: "Your password changed; log in again.", code: 190),
            "Your password changed; log in again.", note: "the user message it is to show"),
        Example(
            AuthError(
                category: .retry, message: "Facebook answered code 2 (a temporary failure).",
                shouldNotifyUser: false, userMessage: "Something went wrong.", code: 2),
            "Facebook answered code 2 (a temporary failure).", note: "a user message not to show"),
        Example(
            CredentialStoreError(
                kind: .corrupt, message: "/tmp/c.json is not a valid Sesame credential file; move it aside."),
            "/tmp/c.json is not a valid Sesame credential file; move it aside."),
        Example(
            DesktopError("The config file /tmp/config.json is a directory; remove it.", status: .config),
            "The config file /tmp/config.json is a directory; remove it."),
        Example(
            SessionTransitionError(from: .opening, to: .opening),
            "A session cannot go from 'opening' to 'opening': a login is already in progress; wait for it to finish."),
        Example(
            timeout, "Could not talk to graph.facebook.com: it did not answer in time (no answer within 10 s)"),
        Example(CryptoError(message: "libcrypto could not be loaded."), "libcrypto could not be loaded."),
        Example(
            SendableErrorBox(timeout),
            "Could not talk to graph.facebook.com: it did not answer in time (no answer within 10 s)"),
        Example(
            RevocationFailed(
                underlying: SendableErrorBox(timeout), advice: "remove the app in Facebook's settings"),
            "The login was removed here, but revoking failed (Could not talk to graph.facebook.com: it did not answer "
                + "in time (no answer within 10 s)); remove the app in Facebook's settings."),
        Example(PermissionsUnsupported(), "This provider's permissions are chosen when logging in."),
        Example(
            IDTokenError.malformed("it has 2 parts, not 3"),
            "The ID token failed the malformed check: it has 2 parts, not 3."),
        Example(
            HTTPServerError.alreadyStarted("127.0.0.1:8080"),
            "The server on 127.0.0.1:8080 was already started; make a new HTTPServer to listen again."),
        Example(
            EmulatorError(message: "There is no emulator scenario named 'x'."),
            "There is no emulator scenario named 'x'."),
    ]

    @Test("localizedDescription is the error's own sentence", arguments: examples)
    func readsAsASentence(_ example: Example) {
        #expect((example.error as any Error).localizedDescription == example.sentence)
        #expect(example.error is any LocalizedError)
    }

    /// The keyring the default storage policy needs, missing, as DesktopStorage reports it.
    static func missingKeyring(_ kind: CredentialStoreError.Kind) async -> DesktopError? {
        await #expect(throws: DesktopError.self) {
            _ = try await DesktopStorage.select(
                Sourced(.keyring, source: "default"),
                keyring: { throw CredentialStoreError(kind: kind, message: "no keyring here (test)") },
                environment: ["XDG_STATE_HOME": "/nonexistent/state"])
        }
    }

    /// Whether `text` names a command-line option (`--name`) outside a quoted command of another
    /// program (`dbus-run-session -- …` and the like are quoted in backticks).
    static func namesAFlag(_ text: String) -> Bool {
        let unquoted = text.split(separator: "`", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 0 }.map(\.element).joined(separator: " ")
        return unquoted.contains(/--[a-z]/)
    }

    @Test(
        "a missing keyring: the library names the `file` storage policy and no flag; the sesame command adds its flag",
        arguments: [CredentialStoreError.Kind.noSessionBus, .noSecretService, .unavailable])
    func missingKeyringAdvice(_ kind: CredentialStoreError.Kind) async throws {
        let error = try #require(await Self.missingKeyring(kind))
        #expect(error.status == .unavailable)
        #expect(!Self.namesAFlag(error.message), "\(error.message)")
        #expect(!error.message.contains("sesame"), "\(error.message)")
        #expect(error.message.contains("`file` storage policy"), "\(error.message)")
        #expect(error.message.contains("SESAME_STORAGE=file"), "\(error.message)")
        #expect((error as any Error).localizedDescription == error.message)

        let failure = CommandFailure.from(error, provider: "facebook")
        #expect(failure.status == 69)
        #expect(failure.message == "\(error.message) With the sesame command: --storage file.")
    }

    @Test("the sesame command adds its flag to a keyring store error only when the keyring is absent")
    func storeErrorAdvice() {
        let absent = CredentialStoreError(
            kind: .noSecretService,
            message: "Sesame could not reach the desktop keyring; choose the file store (storage policy `file`).")
        #expect(!Self.namesAFlag(absent.message))
        #expect(CommandFailure.from(absent, provider: "facebook").message.hasSuffix("--storage file."))

        let locked = CredentialStoreError(kind: .locked, message: "The keyring is locked; unlock it and try again.")
        #expect(CommandFailure.from(locked, provider: "facebook").message == locked.message)
        let other = DesktopError("The config file /tmp/config.json is a directory; remove it.", status: .config)
        #expect(CommandFailure.from(other, provider: "facebook").message == other.message)
    }
}
