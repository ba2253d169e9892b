import Foundation
import SesameHTTPServer

/// The emulator's HTML pages: plain forms a person (or a script) can answer.
enum Page {
    static func escape(_ text: String) -> String { HTMLEscaping.escape(text) }

    static func document(_ title: String, _ body: String) -> String {
        """
        <!doctype html>
        <html><head><meta charset="utf-8"><title>\(escape(title)) · Acme emulator</title></head>
        <body><p><em>Acme emulator: a local stand-in, not a real Acme server.</em></p>
        <h1>\(escape(title))</h1>
        \(body)
        </body></html>
        """
    }

    static func message(_ title: String, _ text: String) -> String { document(title, "<p>\(escape(text))</p>") }

    static func personChoice() -> String {
        "<p><label>Sign in as <select name=\"user\">"
            + AcmeEmulator.users.map { "<option value=\"\(escape($0.login))\">\(escape($0.name))</option>" }.joined()
            + "</select></label></p>"
    }

    /// The consent page: the authorization request's parameters carried in hidden fields.
    static func consent(parameters: Parameters, clientID: String, scopes: [String]) -> String {
        let hidden = parameters.filter { !["decision", "user"].contains($0.0) }.map {
            "<input type=\"hidden\" name=\"\(escape($0.0))\" value=\"\(escape($0.1))\">"
        }.joined(separator: "\n")
        return document(
            "Allow \(clientID)?",
            """
            <p>The app <code>\(escape(clientID))</code> asks for: \(escape(scopes.joined(separator: ", "))).</p>
            <form method="post" action="/oauth/authorize">
            \(hidden)
            \(personChoice())
            <button name="decision" value="allow">Allow</button>
            <button name="decision" value="deny">Deny</button>
            </form>
            """)
    }

    /// The page where a device login's code is entered.
    static func deviceForm(userCode: String) -> String {
        document(
            "Enter the code the app shows",
            """
            <form method="post" action="/device">
            <p><input name="user_code" value="\(escape(userCode))" autocomplete="off"></p>
            \(personChoice())
            <button name="decision" value="allow">Allow</button>
            <button name="decision" value="deny">Deny</button>
            </form>
            """)
    }
}
