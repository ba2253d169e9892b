// fb-login: the Facebook SDK tutorial's login flow, on a terminal.
//
//   fb-login           log in (silently when a token is cached), say who is logged in
//   fb-login logout    forget the token; the next start shows the login screen again
//
// With no app id configured it runs against Sesame's built-in Facebook emulator.

import Foundation
import Sesame
import SesameDesktop
import SesameFacebook
import SesameFacebookEmulatorDesktop
import SesameFacebookPlugin

#if canImport(Glibc)
    import Glibc
#endif

// A reader that goes away (`fb-login | head -1`) is a failed write, never a signal or a trap:
// every line goes through StandardStreams, which reports EPIPE instead of crashing.
signal(SIGPIPE, SIG_IGN)

// Each line may carry text from outside (a message or name the server sent): printed without
// control characters, so it cannot move the cursor or forge lines.
func say(_ text: String) { StandardStreams.out(Terminal.printable(text) + "\n") }
func complain(_ text: String) { StandardStreams.err(Terminal.printable(text) + "\n") }

let usage = """
    usage: fb-login [logout]

    Logs in to Facebook the way the SDK tutorial's Scrumptious app does: a cached token opens the
    session silently; otherwise the login screen and a device login. 'logout' forgets the token.
    With no app id configured (SESAME_FACEBOOK_APP_ID), it uses Sesame's built-in emulator.

    """

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments == ["-h"] || arguments == ["--help"] {
    StandardStreams.out(usage)
    exit(0)
}
guard arguments.isEmpty || arguments == ["logout"] else {
    complain("fb-login: unexpected argument '\(arguments[0])'.")
    StandardStreams.err("\n" + usage)
    exit(64)
}

/// Prints each state change as the state stream delivers it: the Facebook SDK sample's sessionStateChanged:
/// notification. The observer ends once the session is open or closed.
func observe(_ session: FacebookSession) async -> Task<Void, Never> {
    let changes = session.stateChanges()  // registered now, before the session is opened
    return Task {
        for await change in changes {
            say(
                "session: \(change.previousState) → \(change.state)"
                    + (change.error.map { " (\($0.category.rawValue))" } ?? ""))
            if change.state.isOpen || change.state.isClosed { break }
        }
    }
}

/// The Scrumptious sample's handleAuthError, by Sesame's one rule: follow the tactic (a cancelled login calls for
/// nothing but a log line), and show `userMessage` when `shouldNotifyUser`, otherwise `contextualMessage` (for a
/// removed app, 190/458: "The app was removed. Please log in again.").
func handleAuthError(_ error: AuthError) {
    if error.recoveryTactic == RecoveryTactic.none {
        complain("user cancelled login")
    } else if error.shouldNotifyUser {
        say("\(error.userTitle ?? "Something Went Wrong"): \(error.messageForPerson)")
    } else {
        let title = error.recoveryTactic == .reauthenticate ? "Session Error" : "Something Went Wrong"
        say("\(title): \(error.messageForPerson)")
    }
}

/// One sentence for an error that is not the provider's: what went wrong, no dump.
func sentence(for error: any Error) -> String {
    if let error = error as? DesktopError { return error.message }
    if let error = error as? AuthError { return error.messageForPerson }
    let text = String(describing: error).split(separator: "\n").first.map(String.init) ?? "unknown error"
    return text.last.map { ".!?".contains($0) } == true ? text : "\(text)."
}

/// The person's name from the Graph API (the Scrumptious sample's "me" request).
func whoIsLoggedIn(_ session: FacebookSession) async throws -> String {
    let me = try await session.graph.get("me", parameters: ["fields": "name"])
    if let name = me["name"]?.stringValue { return name }
    return await session.token?.userID ?? "someone"
}

/// The login screen, then the login: the Scrumptious sample's showLoginView and openSession.
func showLoginScreen(_ facebook: DesktopFacebook, _ session: FacebookSession) async throws -> Int32 {
    say("┌─ Scrumptious ─────────────────────┐")
    say("│  Log in with Facebook             │")
    say("└───────────────────────────────────┘")
    if facebook.terminal.inputIsInteractive {
        say("Press Enter to log in.")
        _ = readLine()
    }
    let observer = await observe(session)
    do {
        try await session.openActiveSession(readPermissions: ["public_profile"], allowLoginUI: true)
    } catch {
        observer.cancel()
        throw error
    }
    await observer.value
    do {
        say("Logged in as \(try await whoIsLoggedIn(session)).")
        return 0
    } catch let error as AuthError {
        handleAuthError(error)
        return 1
    }
}

func run(_ facebook: DesktopFacebook) async -> Int32 {
    let session = facebook.session()
    let observer = await observe(session)
    do {
        // At start, a cached token opens the session silently (createdTokenLoaded → open), no UI.
        let state = try await session.openActiveSession(allowLoginUI: false)
        if arguments == ["logout"] {
            guard state.isOpen else {
                observer.cancel()
                say("Nobody is logged in.")
                return 0
            }
            // closeAndClearTokenInformation: the token leaves the store, so the next start shows
            // the login screen.
            try await session.logout(revoke: false)
            await observer.value
            say("Logged out.")
            return 0
        }
        guard state.isOpen else {
            observer.cancel()
            return try await showLoginScreen(facebook, session)
        }
        await observer.value
        do {
            let name = try await whoIsLoggedIn(session)
            say("Welcome back, \(name). (Cached token; no login needed.)")
            return 0
        } catch let error as AuthError {
            // The cached token no longer works (the app was removed, the account is locked...):
            // the error's own message, then the login screen, as Scrumptious does.
            handleAuthError(error)
            if error.category == .userCancelled { return 1 }
            try? await session.closeAndClearTokenInformation()
            return try await showLoginScreen(facebook, session)
        }
    } catch let error as AuthError {
        observer.cancel()
        handleAuthError(error)
        return 1
    } catch {
        observer.cancel()
        complain("fb-login: \(sentence(for: error))")
        return 69
    }
}

var status: Int32
do {
    let facebook = try await Desktop.facebook(
        terminal: .current(), emulators: BuiltInEmulators([FacebookEmulatorPlugin()]))
    status = await run(facebook)
    await facebook.shutdown()
} catch let error as DesktopError {
    complain("fb-login: \(error.message)")
    status = error.status.rawValue
} catch {
    complain("fb-login: \(sentence(for: error))")
    status = 69
}
exit(status)
