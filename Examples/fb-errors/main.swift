// fb-errors: the error UI of the Facebook SDK's error guide, drawn as a boxed alert, by Sesame's one
// rule for every error.
//
//   fb-errors --all      every emulator scenario in turn
//   fb-errors NAME       one scenario (app-removed, password-changed, transient, ...)
//   fb-errors -          an error response body from standard input
//
// For each error it follows the recovery tactic (nothing for a cancelled login; a title saying what
// comes next otherwise) and shows `userMessage` when `shouldNotifyUser`, otherwise
// `contextualMessage`: the message the guide builds from the code and subcode ("The app was
// removed. Please log in again." for 190/458), or its category's.

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
    // Follow the tactic: a cancelled login calls for nothing; log it.
    if error.recoveryTactic == RecoveryTactic.none {
        complain("user cancelled login")
        return nil
    }
    // The message: userMessage when shouldNotifyUser, otherwise contextualMessage.
    return (title(for: error), error.messageForPerson)
}

/// The alert's title: the provider's when it asks for its message to be shown, otherwise what the
/// tactic will do next.
func title(for error: AuthError) -> String {
    if error.shouldNotifyUser, let title = error.userTitle { return title }
    switch error.recoveryTactic {
    case .reauthenticate: return "Session Error"
    case .requestPermissions: return "Permission Error"
    case .retryAfterBackoff: return "Please Wait"
    default: return "Something Went Wrong"
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
