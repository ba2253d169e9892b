import Foundation
import Sesame
import SesameEmulator

extension OIDCEngine {
    // MARK: Client authentication

    enum ClientCheck {
        case client(String)
        case refused(Reply)
    }

    /// Who the client is, from HTTP Basic (`client_secret_basic`), the form body
    /// (`client_secret_post`) or `client_id` alone (`none`, public clients) — RFC 6749 §2.3.1.
    func authenticateClient(_ request: LoopbackRequest, _ state: inout State) -> ClientCheck {
        if request.form.contains(where: { $0.0 == "client_assertion" }) {
            return authenticateClientAssertion(request, &state)
        }
        func refuse(_ description: String) -> ClientCheck {
            var response = Reply.oauthError("invalid_client", description, status: 401)
            // RFC 6749 §5.2: a 401 names the scheme the client can authenticate with.
            response.headers["WWW-Authenticate"] = "Basic realm=\"sesame-emulator\", charset=\"UTF-8\""
            return .refused(response)
        }
        let bodyID = request.form.first { $0.0 == "client_id" }?.1
        let bodySecret = request.form.first { $0.0 == "client_secret" }?.1
        let header = request.headers["Authorization"] ?? ""
        if header.lowercased().hasPrefix("basic ") {
            guard let data = Data(base64Encoded: header.dropFirst(6).trimmedASCII),
                let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":")
            else { return refuse("The Authorization header is not HTTP Basic client_id:client_secret.") }
            let id = String(text[..<colon]).removingPercentEncoding ?? String(text[..<colon])
            let secret =
                String(text[text.index(after: colon)...]).removingPercentEncoding
                ?? String(text[text.index(after: colon)...])
            guard bodySecret == nil else {
                return .refused(
                    Reply.oauthError(
                        "invalid_request", "The client authenticated twice (HTTP Basic and client_secret in the body).")
                )
            }
            if let bodyID, bodyID != id {
                return .refused(Reply.oauthError("invalid_request", "client_id differs from the HTTP Basic user."))
            }
            guard let registered = state.clients[id] else { return refuse("Unknown client.") }
            if let registered {
                guard OAuth.constantTimeEquals(secret, registered) else { return refuse("The client secret is wrong.") }
            } else if !secret.isEmpty {
                return refuse("This client is public and has no secret.")
            }
            return .client(id)
        }
        guard let id = bodyID ?? request["client_id"], let registered = state.clients[id] else {
            return refuse("Unknown client.")
        }
        if let registered {
            guard let bodySecret else {
                return refuse(
                    "This client is confidential: authenticate with its secret (HTTP Basic or client_secret).")
            }
            guard OAuth.constantTimeEquals(bodySecret, registered) else { return refuse("The client secret is wrong.") }
        } else if let bodySecret, !bodySecret.isEmpty {
            return refuse("This client is public and has no secret.")
        }
        return .client(id)
    }

    // MARK: Authorization

    func authorize(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        guard let clientID = request["client_id"], let clientSecret = state.clients[clientID] else {
            return Reply.html(
                Self.page(title: "Unknown client", body: "<p>The client_id is not registered.</p>"), status: 400)
        }
        guard let redirect = request["redirect_uri"], let url = URL(string: redirect),
            url.scheme == "http", ["127.0.0.1", "localhost", "[::1]", "::1"].contains(url.host ?? "")
        else {
            return Reply.html(
                Self.page(title: "Bad redirect", body: "<p>redirect_uri must be a loopback http URL (RFC 8252).</p>"),
                status: 400)
        }
        let issuer = state.issuer
        let sendsIssuer = Self.sendsIssuerInRedirect(state)
        func fail(_ error: String, _ description: String) -> Reply {
            var items = [("error", error), ("error_description", description)]
            if let state = request["state"] { items.append(("state", state)) }
            if sendsIssuer { items.append(("iss", issuer)) }
            return Reply.redirect(OAuth.appendingQuery(items, to: url).absoluteString)
        }
        guard request["response_type"] == "code" else { return fail("unsupported_response_type", "Only code.") }
        let scope = request["scope"] ?? ""
        // Dropbox and Slack are not OpenID issuers: their scopes need no openid.
        guard scope.split(separator: " ").contains("openid") || !(state.quirks?.isOpenIDIssuer ?? true) else {
            return fail("invalid_scope", "openid is required.")
        }
        let challenge = request["code_challenge"]
        if clientSecret == nil {
            guard challenge != nil, request["code_challenge_method"] == "S256" else {
                return fail("invalid_request", "Public clients must send a PKCE S256 code_challenge.")
            }
        }
        var pending = Pending(
            clientID: clientID, redirectURI: redirect, state: request["state"], nonce: request["nonce"], scope: scope,
            challenge: challenge)
        pending.parameters = Dictionary(request.parameters, uniquingKeysWith: { first, _ in first })
        let prompts = Set((request["prompt"] ?? "").split(separator: " ").map(String.init))
        if prompts.contains("none") {
            // Core §3.1.2.1: no page may be shown. The emulator keeps no browser session, so a
            // person is known only by login_hint, and only a consent given before counts.
            guard prompts.count == 1 else {
                return fail("invalid_request", "prompt=none cannot be combined with other prompt values.")
            }
            guard let hint = request["login_hint"], let person = try? Self.person(hint, in: state) else {
                return fail("login_required", "No one is signed in; the emulator needs login_hint with prompt=none.")
            }
            let asked = Set(scope.split(separator: " ").map(String.init))
            guard asked.isSubset(of: state.consents[clientID + " " + person.sub] ?? []) else {
                return fail("consent_required", "\(person.name) has not consented to these scopes for this client.")
            }
            return codeRedirect(pending, person: person, authTime: now(state), &state)
        }
        let id = (try? Crypto.randomURLSafeString(byteCount: 12)) ?? UUID().uuidString
        state.pending[id] = pending
        let people = state.people
        return Reply.html(Self.consentPage(clientID: clientID, requestID: id, scope: scope, people: people))
    }

    /// The page that asks who signs in and whether `clientID` may have `scope`.
    static func consentPage(clientID: String, requestID: String, scope: String, people: [Person]) -> String {
        var body = "<h1>Sign in to \(HTML.escape(clientID))</h1>\n<form method=\"post\" action=\"/authorize\">\n"
        body += "<input type=\"hidden\" name=\"request\" value=\"\(HTML.escape(requestID))\">\n"
        body += personPicker(people, label: "Continue as")
        body += "<p>\(HTML.escape(clientID)) is requesting access to:</p>\n<ul>\n"
        for name in scope.split(separator: " ") { body += "<li><code>\(HTML.escape(String(name)))</code></li>\n" }
        body += "</ul>\n<div class=\"buttons\">\n"
        body += "<button class=\"primary\" type=\"submit\" name=\"action\" value=\"allow\">Allow</button>\n"
        body += "<button type=\"submit\" name=\"action\" value=\"cancel\">Cancel</button>\n</div>\n</form>\n"
        return page(title: "Sign in to \(clientID)", body: body)
    }

    /// A `<select>` of the people, so a page can be answered as any of them.
    static func personPicker(_ people: [Person], label: String) -> String {
        var html = "<p><label for=\"user\">\(HTML.escape(label))</label> <select id=\"user\" name=\"user\">\n"
        for person in people {
            html += "<option value=\"\(HTML.escape(person.sub))\">\(HTML.escape(person.name))</option>\n"
        }
        return html + "</select></p>\n"
    }

    static func devicePage(prefilled code: String?, people: [Person]) -> String {
        var body = "<h1>Sign in on another device</h1><p>Enter the code shown by the app.</p>\n"
        body += "<form method=\"post\" action=\"/device\">\n<p><input name=\"user_code\" autocomplete=\"off\""
        if let code { body += " value=\"\(HTML.escape(code))\"" }
        body += "></p>\n" + personPicker(people, label: "Approve as")
        body += "<div class=\"buttons\"><button class=\"primary\" name=\"action\" value=\"allow\">Allow</button>"
        body += "<button name=\"action\" value=\"deny\">Deny</button></div></form>"
        return Self.page(title: "Enter your code", body: body)
    }

    func decide(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        guard let id = request["request"], let pending = state.pending.removeValue(forKey: id),
            let url = URL(string: pending.redirectURI)
        else {
            return Reply.html(
                Self.page(title: "Expired", body: "<p>This sign-in request is no longer valid.</p>"), status: 400)
        }
        if request["action"] == "cancel" {
            var items = [("error", "access_denied"), ("error_description", "The person cancelled.")]
            if let value = pending.state { items.append(("state", value)) }
            return issuerRedirect(url, items, &state)
        }
        guard let person = try? Self.person(request["user"], in: state) else {
            return Reply.html(Self.page(title: "Unknown person", body: "<p>No such person.</p>"), status: 400)
        }
        state.consents[pending.clientID + " " + person.sub, default: []].formUnion(
            pending.scope.split(separator: " ").map(String.init))
        return codeRedirect(pending, person: person, authTime: now(state), &state)
    }

    /// Issues a code for `pending` as `person` and sends the browser back with it.
    func codeRedirect(
        _ pending: Pending, person: Person, authTime: Date, _ state: inout State
    )
        -> Reply
    {
        guard let url = URL(string: pending.redirectURI) else {
            return Reply.html(
                Self.page(title: "Bad redirect", body: "<p>The redirect_uri is not a URL.</p>"), status: 400)
        }
        let code = (try? Crypto.randomURLSafeString(byteCount: 24)) ?? UUID().uuidString
        state.codes[code] = Code(
            pending: pending, sub: person.sub, expiresAt: now(state).addingTimeInterval(600), authTime: authTime)
        var items = [("code", code)]
        if let value = pending.state { items.append(("state", value)) }
        return issuerRedirect(url, items, &state)
    }

    /// A redirect to the client with `items`, and `iss` as RFC 9207 has every authorization
    /// response carry (unless a scenario drops or changes it).
    func issuerRedirect(_ url: URL, _ items: [(String, String)], _ state: inout State) -> Reply {
        var items = items
        if consume(.redirectNoIssuer, &state) == nil, Self.sendsIssuerInRedirect(state) {
            let wrong = consume(.redirectWrongIssuer, &state) != nil
            items.append(("iss", wrong ? "https://another-issuer.example" : state.issuer))
        }
        return Reply.redirect(OAuth.appendingQuery(items, to: url).absoluteString)
    }
}
