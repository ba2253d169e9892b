import Foundation
import Sesame
import SesameDesktop
import SesameEmulator
import SesameHTTPServer
import SesameOIDC
import Testing

/// Every public error reads as a sentence through `localizedDescription`, the property an app
/// prints without knowing the type, not as Foundation's "The operation could not be completed".
@Suite("Errors read as sentences through localizedDescription")
struct LocalizedErrorTests {
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
            timeout, "Network error (timedOut) talking to graph.facebook.com: no answer within 10 s"),
        Example(CryptoError(message: "libcrypto could not be loaded."), "libcrypto could not be loaded."),
        Example(
            SendableErrorBox(timeout), "Network error (timedOut) talking to graph.facebook.com: no answer within 10 s"),
        Example(
            RevocationFailed(
                underlying: SendableErrorBox(timeout), advice: "remove the app in Facebook's settings"),
            "The login was removed here, but revoking failed (Network error (timedOut) talking to graph.facebook.com: "
                + "no answer within 10 s); remove the app in Facebook's settings."),
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
}
