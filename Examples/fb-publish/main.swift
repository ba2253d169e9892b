// fb-publish "message": posts to the person's feed, the way the seed's sample app publishes.
//
// It makes sure publish_actions is granted (asking only when it is missing), posts to me/feed,
// retries passing failures and throttling with back-off (printing each wait), asks for the
// permission again after a permissions error, and prints the new post's id.

import Foundation
import Sesame
import SesameDesktop
import SesameDesktopEmulator
import SesameFacebook
import Synchronization

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 1, !arguments[0].isEmpty else {
    FileHandle.standardError.write(Data("usage: fb-publish \"message\"\n".utf8))
    exit(64)
}
let message = arguments[0]

/// What the recovery processor asks of the app: the three things the seed's sample does by hand.
final class Recovery: FacebookRecoveryDelegate {
    let session = Mutex<FacebookSession?>(nil)

    func requestPermissions(_ permissions: [Permission]) async throws -> Bool {
        guard let session = session.withLock({ $0 }) else { return false }
        print("Facebook needs your permission again to publish; asking…")
        // The seed's requestNewPublishPermissions:defaultAudience: with a default audience.
        let outcome = try await session.requestNewPublishPermissions(
            permissions.isEmpty ? ["publish_actions"] : permissions.map(\.name), defaultAudience: .friends)
        return outcome.declined.isEmpty
    }

    func reauthenticate(reason: ReauthenticationReason) async throws -> Bool {
        guard let session = session.withLock({ $0 }) else { return false }
        if !reason.messageShown { print("\(reason.title): \(reason.message)") }
        try await session.openActiveSession(readPermissions: ["public_profile"], allowLoginUI: true)
        return true
    }

    func showMessage(title: String, message: String) async { print("\(title): \(message)") }

    func willRetry(after delay: Duration, attempt: Int, error: AuthError) async {
        let seconds = delay.inSeconds
        print("Facebook said: \(error.message) Waiting \(String(format: "%.1f", seconds)) s before attempt \(attempt).")
    }
}

let facebook: DesktopFacebook
do {
    facebook = try await Desktop.facebook(emulators: .sesame)
} catch let error as DesktopError {
    FileHandle.standardError.write(Data("fb-publish: \(error.message)\n".utf8))
    exit(error.status.rawValue)
}
let recovery = Recovery()
let session = facebook.session(
    recoveryDelegate: recovery,
    recoveryPolicy: RecoveryPolicy(maxAttempts: 4, baseDelay: .milliseconds(250), maxServerHint: .seconds(10)))
recovery.session.withLock { $0 = session }

var status: Int32 = 0
do {
    try await session.openActiveSession(readPermissions: ["public_profile"], allowLoginUI: true)
    // Ask for publish_actions only when it is missing, as requestPermissionCallAPI did.
    if await session.token?.permissions.isGranted("publish_actions") != true {
        print("Asking for permission to publish (audience: friends)…")
        try await session.requestNewPublishPermissions(["publish_actions"], defaultAudience: .friends)
    }
    let post = try await session.graph.post(
        "me/feed", parameters: ["message": message], requiredPermissions: [.publish("publish_actions")])
    print("Posted: \(post["id"]?.stringValue ?? "?")")
} catch let error as AuthError {
    // The seed's publish error handler: a message when there is one, a generic one otherwise.
    if error.shouldNotifyUser, let text = error.userMessage {
        print("Something Went Wrong: \(text)")
    } else if error.category == .userCancelled {
        FileHandle.standardError.write(Data("User cancelled post permissions.\n".utf8))
    } else {
        print("Unknown error: Unable to post to open graph. Please try again later.")
        FileHandle.standardError.write(Data("Unexpected error posting: \(error.message)\n".utf8))
    }
    status = 1
} catch {
    FileHandle.standardError.write(Data("fb-publish: \(error)\n".utf8))
    status = 69
}
facebook.recordUsage(of: session)
await facebook.shutdown()
exit(status)
