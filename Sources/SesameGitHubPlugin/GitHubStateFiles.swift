import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameGitHub

/// The host, client id and server address of the last GitHub login (never a secret), in
/// `$XDG_STATE_HOME/sesame/github.json`.
struct GitHubRememberedLogin: Sendable {
    /// Where remembered values say they come from, in messages.
    static var source: String { "the previous '\(Desktop.programName) login github'" }
    var file: JSONStateFile

    init(stateDirectory: URL) {
        file = JSONStateFile(url: stateDirectory.appendingPathComponent("github.json"))
    }

    func read() -> [String: JSONValue] { file.read() }

    func remember(hostname: String, clientID: String?, url server: String?) throws {
        var object: [String: JSONValue] = ["hostname": .string(hostname)]
        if let clientID { object["client_id"] = .string(clientID) }
        if let server { object["url"] = .string(server) }
        try file.write(object)
    }
}
