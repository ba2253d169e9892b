// fb-errors: the contextual error UI of the Facebook SDK's error guide, drawn as a boxed alert.
//
//   fb-errors --all      every emulator scenario in turn
//   fb-errors NAME       one scenario (app-removed, password-changed, transient, ...)
//   fb-errors -          an error response body from standard input
//
// For each error it shows what the guide's sample app shows: the SDK's message when it says to
// notify the person, "Session Error" when the session must be reopened (with a contextual
// message for a removed app), a re-request for a missing permission, nothing for a cancelled
// login, and a generic message for the rest.

import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameFacebookEmulator
import SesameFacebook

#if canImport(Glibc)
    import Glibc
#endif

// A reader that goes away (`fb-errors --all | head`) is a failed write, never a signal or a trap.
signal(SIGPIPE, SIG_IGN)

func say(_ text: String) { StandardStreams.out(text + "\n") }
func complain(_ text: String) { StandardStreams.err(text + "\n") }

// The alert goes to standard output, so its colour follows standard output.
let terminal = Terminal.current().standardOutput

/// The alert for an error, or `nil` when nothing is shown (the person cancelled).
func alert(for error: AuthError) -> (title: String, message: String)? {
    if error.shouldNotifyUser, let message = error.userMessage {
        // If the SDK has a message for the user, surface it.
        return ("Something Went Wrong", message)
    }
    switch error.category {
    case .userCancelled:
        // The person said no: do nothing, log it.
        complain("user cancelled login")
        return nil
    case .authenticationReopenSession:
        // Sessions close outside the app; say so, more precisely when the code tells why.
        if error.subcode == 458 { return ("Session Error", "The app was removed. Please log in again.") }
        return ("Session Error", "Your current session is no longer valid. Please log in again.")
    case .permissions:
        // A missing permission: ask for it again, then replay the call.
        return ("Permission Error", "The app needs your permission for this. It will ask you for it again.")
    case .throttling:
        // Too many calls: say so, and that waiting helps (the SDK's title for throttling).
        return ("Please Wait", error.userMessage ?? "Too many requests right now. Wait a little, then try again.")
    default:
        return ("Unknown Error", "Error. Please try again later.")
    }
}

/// Draws the alert in a box with an OK button, and waits for Enter when a person is there.
func show(_ title: String, _ message: String) {
    let width = 52
    var lines: [String] = []
    var line = ""
    for word in message.split(separator: " ") {
        if line.count + word.count + 1 > width, !line.isEmpty {
            lines.append(line)
            line = ""
        }
        line += (line.isEmpty ? "" : " ") + word
    }
    if !line.isEmpty { lines.append(line) }
    func row(_ text: String) -> String { "│ " + text + String(repeating: " ", count: width - text.count) + " │" }
    say("┌" + String(repeating: "─", count: width + 2) + "┐")
    say(row(title).replacingOccurrences(of: title, with: terminal.bold(title)))
    say(row(""))
    for text in lines { say(row(text)) }
    say(row(""))
    say(row(String(repeating: " ", count: width - 6) + "[ OK ]"))
    say("└" + String(repeating: "─", count: width + 2) + "┘")
    // Never block a pipe or a script on the prompt.
    if terminal.inputIsInteractive { _ = readLine() }
}

func handle(_ error: AuthError) {
    // The message may be the server's own text: shown without control characters.
    if let (title, message) = alert(for: error) { show(title, Terminal.printable(message)) }
}

/// Runs one scenario against a fresh in-memory emulator: a person with publish_actions posts.
func run(_ scenario: EmulatorScenario) async throws {
    say("== \(scenario.rawValue): \(scenario.summary)")
    let emulator = try Emulator()
    let endpoints = try await emulator.start()
    do {
        try await publish(against: emulator, endpoints: endpoints, scenario: scenario)
    } catch {
        await emulator.stop()
        throw error
    }
    await emulator.stop()
}

/// Activates `scenario` and posts as a person with publish_actions.
func publish(against emulator: Emulator, endpoints: EmulatorEndpoints, scenario: EmulatorScenario) async throws {
    let app = emulator.configuration.defaultApp
    let token = try await emulator.issueToken(permissions: ["publish_actions"])
    var setting = ScenarioSetting(scenario)
    if scenario == .slow { setting.delayMs = 50 }
    try await emulator.activate(setting)
    let provider = FacebookProvider(
        appID: app.id, clientToken: app.clientToken, dialogBaseURL: endpoints.baseURL, graphBaseURL: endpoints.graphURL)
    let graph = GraphClient(provider: provider, transport: facebookTransport, accessToken: token)
    do {
        let post = try await graph.post("me/feed", parameters: ["message": "Hello from fb-errors"])
        say("(no error: the post went through as \(post["id"]?.stringValue ?? "?"))")
    } catch let error as AuthError {
        handle(error)
    }
}

let facebookTransport = CurlTransport()

let usage = """
    usage: fb-errors [--all | NAME | -]

    Shows the alert the Facebook SDK's error guide shows for an error: for every emulator scenario
    (--all), for one (NAME: \(EmulatorScenario.allCases.map(\.rawValue).joined(separator: ", "))),
    or for an error response body read from standard input (-).

    """

/// One sentence for an error that is not the provider's: what went wrong, no dump.
func sentence(for error: any Error) -> String {
    let text = String(describing: error).split(separator: "\n").first.map(String.init) ?? "unknown error"
    return text.last.map { ".!?".contains($0) } == true ? text : "\(text)."
}

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    if arguments == ["-h"] || arguments == ["--help"] {
        StandardStreams.out(usage)
    } else if arguments == ["--all"] {
        for scenario in EmulatorScenario.allCases { try await run(scenario) }
    } else if arguments == ["-"] {
        // An error response body, as Facebook sent it, from standard input.
        let body = FileHandle.standardInput.readDataToEndOfFile()
        handle(FacebookErrorTaxonomy().classify(status: 400, headers: [:], body: body))
    } else if arguments.count == 1, let name = arguments.first, !name.hasPrefix("-") {
        guard let scenario = EmulatorScenario(rawValue: name) else {
            complain(
                "fb-errors: unknown scenario '\(name)'; use one of "
                    + EmulatorScenario.allCases.map(\.rawValue).joined(separator: ", ") + ".")
            exit(64)
        }
        try await run(scenario)
    } else {
        complain(usage)
        exit(64)
    }
} catch {
    complain("fb-errors: \(sentence(for: error))")
    exit(69)
}
