// fb-publish "message": posts to the person's feed, the way the Facebook SDK's Scrumptious sample publishes.
//
// It makes sure publish_actions is granted (asking only when it is missing), posts to me/feed,
// retries passing failures and throttling with back-off (printing each wait), asks for the
// permission again after a permissions error, and prints the new post's id.

import Foundation
import Sesame
import SesameDesktop
import SesameFacebook
import SesameFacebookEmulatorDesktop
import SesameFacebookPlugin

#if canImport(Glibc)
    import Glibc
#endif

// A reader that goes away (`fb-publish hi | head -1`) is a failed write, never a signal or a
// trap; and every line is written at once, unbuffered, so standard output and standard error
// interleave in the order things happened.
signal(SIGPIPE, SIG_IGN)

// Each line may carry text from outside (a message or name the server sent): printed without
// control characters, so it cannot move the cursor or forge lines.
func say(_ text: String) { StandardStreams.out(Terminal.printable(text) + "\n") }
func complain(_ text: String) { StandardStreams.err(Terminal.printable(text) + "\n") }

let usage = """
    usage: fb-publish [--] "message"

    Posts the message to your Facebook feed (asking for publish_actions first when it is missing),
    the way the SDK's sample app publishes, retrying passing failures and throttling. Put '--'
    first to post a message that starts with a dash. With no app id configured
    (SESAME_FACEBOOK_APP_ID), it uses Sesame's built-in emulator.

    """

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "-h" || arguments.first == "--help" {
    StandardStreams.out(usage)
    exit(0)
}
if arguments.first == "--" {
    arguments.removeFirst()
} else if let option = arguments.first, option.hasPrefix("-"), option.count > 1 {
    complain("fb-publish: unknown option '\(option)'; to post it as the message, put '--' before it.")
    StandardStreams.err("\n" + usage)
    exit(64)
}
guard arguments.count == 1, !arguments[0].isEmpty else {
    complain("fb-publish: give the message to post, as one argument.")
    StandardStreams.err("\n" + usage)
    exit(64)
}
let message = arguments[0]

/// What the recovery processor asks of the app: the three things the Scrumptious sample does by hand.
final class Recovery: FacebookRecoveryDelegate {
    let session = Locked<FacebookSession?>(nil)
    /// Whether a message has been shown for the last failure, so it is not followed by a second one.
    let messageShown = Locked(false)

    func requestPermissions(_ permissions: [Permission]) async throws -> Bool {
        guard let session = session.withLock({ $0 }) else { return false }
        say("Facebook needs your permission again to publish; asking…")
        // The Scrumptious sample's requestNewPublishPermissions:defaultAudience: with a default audience.
        let outcome = try await session.requestNewPublishPermissions(
            permissions.isEmpty ? ["publish_actions"] : permissions.map(\.name), defaultAudience: .friends)
        return outcome.declined.isEmpty
    }

    func reauthenticate(reason: ReauthenticationReason) async throws -> Bool {
        guard let session = session.withLock({ $0 }) else { return false }
        if !reason.messageShown { say("\(reason.title): \(reason.message)") }
        messageShown.withLock { $0 = false }
        try await session.openActiveSession(readPermissions: ["public_profile"], allowLoginUI: true)
        return true
    }

    func showMessage(title: String, message: String) async {
        messageShown.withLock { $0 = true }
        say("\(title): \(message)")
    }

    func willRetry(after delay: Duration, attempt: Int, error: AuthError) async {
        let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
        say("Facebook said: \(error.message) Waiting \(String(format: "%.1f", seconds)) s before attempt \(attempt).")
    }
}

/// One sentence for an error that is not the provider's: what went wrong, no dump.
func sentence(for error: any Error) -> String {
    if let error = error as? DesktopError { return error.message }
    let text = String(describing: error).split(separator: "\n").first.map(String.init) ?? "unknown error"
    return text.last.map { ".!?".contains($0) } == true ? text : "\(text)."
}

/// The Scrumptious sample's publish error handler: a message when there is one, a title that says what kind of
/// failure it is, a generic message otherwise.
func report(_ error: AuthError, recovery: Recovery) {
    if recovery.messageShown.withLock({ $0 }) {
        // The recovery processor has already told the person (its title and message).
        return
    }
    if error.shouldNotifyUser, let text = error.userMessage {
        say("Something Went Wrong: \(text)")
    } else if error.category == .userCancelled {
        complain("User cancelled post permissions.")
    } else if [.throttling, .server, .retry].contains(error.category) {
        let text = RecoveryTexts.standard.text(for: error)
        say("\(text.title): \(text.message)")
    } else {
        say("Unknown error: Unable to post to open graph. Please try again later.")
        complain("Unexpected error posting: \(error.message)")
    }
}

func publish(_ facebook: DesktopFacebook) async -> Int32 {
    let recovery = Recovery()
    let session = facebook.session(
        recoveryDelegate: recovery,
        recoveryPolicy: RecoveryPolicy(maxAttempts: 4, baseDelay: .milliseconds(250), maxServerHint: .seconds(10)))
    recovery.session.withLock { $0 = session }
    let status = await post(session, recovery: recovery)
    await facebook.recordUsage(of: session)
    // The session holds its recovery delegate, which holds the session: let go of it here, or
    // neither is ever freed (LeakSanitizer reported the cycle).
    recovery.session.withLock { $0 = nil }
    return status
}

func post(_ session: FacebookSession, recovery: Recovery) async -> Int32 {
    do {
        try await session.openActiveSession(readPermissions: ["public_profile"], allowLoginUI: true)
        // Ask for publish_actions only when it is missing, as requestPermissionCallAPI did.
        if await session.token?.permissions.isGranted("publish_actions") != true {
            say("Asking for permission to publish (audience: friends)…")
            try await session.requestNewPublishPermissions(["publish_actions"], defaultAudience: .friends)
        }
        recovery.messageShown.withLock { $0 = false }
        let post = try await session.graph.post(
            "me/feed", parameters: ["message": message], requiredPermissions: [.publish("publish_actions")])
        say("Posted: \(post["id"]?.stringValue ?? "?")")
        return 0
    } catch let error as AuthError {
        report(error, recovery: recovery)
        return 1
    } catch {
        complain("fb-publish: \(sentence(for: error))")
        return 69
    }
}

var status: Int32
do {
    let facebook = try await Desktop.facebook(
        terminal: .current(), emulators: BuiltInEmulators([FacebookEmulatorPlugin()]))
    status = await publish(facebook)
    await facebook.shutdown()
} catch let error as DesktopError {
    complain("fb-publish: \(error.message)")
    status = error.status.rawValue
} catch {
    complain("fb-publish: \(sentence(for: error))")
    status = 69
}
exit(status)
