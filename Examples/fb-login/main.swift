// fb-login: the Facebook SDK tutorial's login flow, on a terminal.
//
//   fb-login           log in (silently when a token is cached), say who is logged in
//   fb-login logout    forget the token; the next start shows the login screen again
//
// With no app id configured it runs against Sesame's built-in Facebook emulator.

import Foundation
import Sesame
import SesameDesktop
import SesameDesktopEmulator
import SesameFacebook

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.isEmpty || arguments == ["logout"] else {
    FileHandle.standardError.write(Data("usage: fb-login [logout]\n".utf8))
    exit(64)
}

let facebook: DesktopFacebook
do {
    facebook = try await Desktop.facebook(emulators: .sesame)
} catch let error as DesktopError {
    FileHandle.standardError.write(Data("fb-login: \(error.message)\n".utf8))
    exit(error.status.rawValue)
}
let session = facebook.session()

// Print each state change as the state stream delivers it: the seed's sessionStateChanged:
// notification. The observer ends once the session is open or closed.
let changes = session.stateChanges()  // registered now, before the open below
let observer = Task {
    for await change in changes {
        print(
            "session: \(change.previousState) → \(change.state)"
                + (change.error.map { " (\($0.category.rawValue))" } ?? ""))
        if change.state.isOpen || change.state.isClosed { break }
    }
}

func whoIsLoggedIn() async -> String {
    let me = try? await session.graph.get("me", parameters: ["fields": "name"])
    if let name = me?["name"]?.stringValue { return name }
    return await session.token?.userID ?? "someone"
}

var status: Int32 = 0
do {
    // At start, a cached token opens the session silently (createdTokenLoaded → open), no UI.
    let state = try await session.openActiveSession(allowLoginUI: false)
    if arguments == ["logout"] {
        if state.isOpen {
            // closeAndClearTokenInformation: the token leaves the store, so the next start shows
            // the login screen.
            try await session.logout(revoke: false)
            await observer.value
            print("Logged out.")
        } else {
            observer.cancel()
            print("Nobody is logged in.")
        }
    } else if state.isOpen {
        await observer.value
        print("Welcome back, \(await whoIsLoggedIn()). (Cached token; no login needed.)")
    } else {
        // The login screen.
        print("┌─ Scrumptious ─────────────────────┐")
        print("│  Log in with Facebook             │")
        print("└───────────────────────────────────┘")
        if facebook.terminal.inputIsInteractive {
            print("Press Enter to log in.")
            _ = readLine()
        }
        try await session.openActiveSession(readPermissions: ["public_profile"], allowLoginUI: true)
        await observer.value
        print("Logged in as \(await whoIsLoggedIn()).")
    }
} catch let error as AuthError {
    observer.cancel()
    // The seed's handleAuthError: a message when the SDK has one, nothing when the person
    // cancelled (one log line), a generic message otherwise.
    if error.shouldNotifyUser, let message = error.userMessage {
        print("Something Went Wrong: \(message)")
    } else if error.category == .userCancelled {
        FileHandle.standardError.write(Data("user cancelled login\n".utf8))
    } else if error.category == .authenticationReopenSession {
        print("Session Error: Your current session is no longer valid. Please log in again.")
    } else {
        print("Unknown Error: Error. Please try again later.")
    }
    status = 1
} catch {
    observer.cancel()
    FileHandle.standardError.write(Data("fb-login: \(error)\n".utf8))
    status = 69
}
await facebook.shutdown()
exit(status)
