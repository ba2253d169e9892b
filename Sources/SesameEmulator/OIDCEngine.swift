import Foundation
import Sesame
import Synchronization

/// The OIDC emulator's state and request handling. Every request is handled under one lock,
/// start to finish, without suspending.
final class OIDCEngine: LoopbackEngine {
    struct Person: Sendable {
        var sub: String
        var name: String
        var email: String
    }
    struct Pending: Sendable {
        var clientID: String
        var redirectURI: String
        var state: String?
        var nonce: String?
        var scope: String
        var challenge: String?
    }
    struct Code: Sendable {
        var pending: Pending
        var sub: String
        var expiresAt: Date
        var authTime: Date
    }
    /// One person's consent to one client: every token issued from it shares its `id`, so that
    /// revoking its refresh token revokes its access tokens too (RFC 7009 §2.1).
    struct Grant: Sendable {
        var id: String
        var clientID: String
        var sub: String
        var scope: String
        /// When the person signed in (the ID token's `auth_time`).
        var authTime: Date
    }
    struct Device: Sendable {
        var clientID: String
        var userCode: String
        var scope: String
        var expiresAt: Date
        var approvedFor: String?
        var approvedAt: Date?
        var denied = false
    }
    typealias Scenario = CountedScenario<OIDCScenarioSetting>
    struct State: Sendable {
        var issuer = "http://127.0.0.1"
        var clients: [String: String?]
        var people: [Person]
        var keys: [(kid: String, key: SignatureSigningKey)]
        var pending: [String: Pending] = [:]
        var codes: [String: Code] = [:]
        var accessTokens: [String: (grant: Grant, expiresAt: Date)] = [:]
        var refreshTokens: [String: Grant] = [:]
        var devices: [String: Device] = [:]
        var scenarios: [Scenario] = []
        var clockOffset: TimeInterval = 0
        var revokedCount = 0
        /// Seconds a device authorization asks clients to wait between polls.
        var devicePollInterval = 5
        var requestCounts: [String: Int] = [:]
        var nextKeyNumber = 2
        /// The scopes each person consented to, per client (`"client sub"`), for `prompt=none`.
        var consents: [String: Set<String>] = [:]
    }

    let algorithm: SignatureAlgorithm
    let accessTokenLifetime: TimeInterval
    private let state: Mutex<State>

    init(algorithm: SignatureAlgorithm, clients: [String: String?], accessTokenLifetime: TimeInterval) throws {
        self.algorithm = algorithm
        self.accessTokenLifetime = accessTokenLifetime
        var all = clients
        all[OIDCEmulator.defaultClientID] = .some(nil)
        state = Mutex(
            State(
                clients: all,
                people: [
                    Person(sub: "248289761001", name: "Alice Example", email: "alice@example.com"),
                    Person(sub: "248289761002", name: "Bob Example", email: "bob@example.com"),
                ],
                keys: [(kid: "key-1", key: try SignatureSigningKey(generating: algorithm))]))
    }

    func locked<T>(_ body: (inout State) throws -> T) rethrows -> T { try state.withLock { try body(&$0) } }

    func setIssuer(_ issuer: String) { locked { $0.issuer = issuer } }

    func activate(_ setting: OIDCScenarioSetting) throws {
        let fresh: SignatureSigningKey? =
            setting.scenario == .keyRotated ? try SignatureSigningKey(generating: algorithm) : nil
        locked { state in
            if let fresh {
                state.keys.insert((kid: "key-\(state.nextKeyNumber)", key: fresh), at: 0)
                state.nextKeyNumber += 1
                return
            }
            let oneShot: Set<OIDCScenario> = [
                .badSignature, .wrongIssuer, .wrongAudience, .expiredIDToken, .wrongNonce, .unknownKey, .refreshRevoked,
                .redirectWrongIssuer, .redirectNoIssuer,
            ]
            let remaining = setting.count ?? (oneShot.contains(setting.scenario) ? 1 : nil)
            state.scenarios.append(Scenario(setting: setting, remaining: remaining))
        }
    }

    func answerDevice(userCode: String, user: String?, approve: Bool) throws {
        try locked { state in
            guard let code = Self.deviceCode(matching: userCode, in: state) else {
                throw EmulatorError(message: "No device login is waiting with the code \(userCode).")
            }
            let person = try Self.person(user, in: state)
            Self.answer(device: code, as: person, approve: approve, &state)
        }
    }

    /// A user code as people type it: case and separators ignored (RFC 8628 §6.1).
    static func normalizedUserCode(_ code: String) -> String {
        String(code.uppercased().unicodeScalars.filter { ("A"..."Z").contains($0) || ("0"..."9").contains($0) })
    }

    /// The device code of the waiting login whose user code is `userCode`, however it was typed.
    static func deviceCode(matching userCode: String, in state: State) -> String? {
        let wanted = normalizedUserCode(userCode)
        guard !wanted.isEmpty else { return nil }
        return state.devices.first { normalizedUserCode($0.value.userCode) == wanted }?.key
    }

    static func answer(device code: String, as person: Person, approve: Bool, _ state: inout State) {
        if approve {
            state.devices[code]?.approvedFor = person.sub
            state.devices[code]?.approvedAt = Date().addingTimeInterval(state.clockOffset)
        } else {
            state.devices[code]?.denied = true
        }
    }

    /// Registers a client, or replaces its secret: a secret makes it confidential, `nil` public.
    func register(clientID: String, secret: String?) throws {
        guard !clientID.isEmpty, clientID.utf8.count <= 200 else {
            throw EmulatorError(message: "A client id must be 1 to 200 bytes long.")
        }
        locked { $0.clients[clientID] = .some(secret) }
    }

    static func person(_ id: String?, in state: State) throws -> Person {
        guard let id else { return state.people[0] }
        guard let person = state.people.first(where: { $0.sub == id || $0.email == id || $0.name == id }) else {
            throw EmulatorError(message: "No person '\(id)' is known to the OIDC emulator.")
        }
        return person
    }

    // MARK: Dispatch

    func handle(
        method: HTTPMethod, path: String, query: [(String, String)], headers: HTTPHeaders, body: Data
    )
        -> HTTPResponse
    {
        // Read before the lock is taken and encoded after it is released, so that a large body
        // or answer holds up only its own client.
        let request = LoopbackRequest(method: method, path: path, query: query, headers: headers, body: body)
        let reply = locked { state in
            state.requestCounts[path, default: 0] += 1
            return route(request, &state)
        }
        return reply.response
    }

    private func route(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        switch (request.method, request.path) {
        case (.get, "/.well-known/openid-configuration"): return Reply.json(discovery(state))
        case (.get, "/jwks"): return Reply.json(jwks(state))
        case (.get, "/authorize"): return authorize(request, &state)
        // Core §3.1.2.1: the authorization request may be form-POSTed; the consent page posts
        // its decision to the same place, without a response_type.
        case (.post, "/authorize"):
            return request["response_type"] == nil ? decide(request, &state) : authorize(request, &state)
        case (.post, "/token"): return token(request, &state)
        case (.post, "/device_authorization"): return deviceAuthorization(request, &state)
        case (.get, "/userinfo"), (.post, "/userinfo"): return userinfo(request, state)
        case (.post, "/revoke"): return revoke(request, &state)
        case (.get, "/device"): return Reply.html(devicePage(prefilled: request["user_code"], state))
        case (.post, "/device"):
            guard let code = request["user_code"] else {
                return Reply.html(page(title: "No code", body: "<p>Enter the code the app shows.</p>"), status: 400)
            }
            guard let deviceCode = Self.deviceCode(matching: code, in: state) else {
                return Reply.html(
                    page(title: "Unknown code", body: "<p>That code is not valid, or it expired.</p>"), status: 400)
            }
            guard let person = try? Self.person(request["user"], in: state) else {
                return Reply.html(page(title: "Unknown person", body: "<p>No such person.</p>"), status: 400)
            }
            Self.answer(device: deviceCode, as: person, approve: request["action"] != "deny", &state)
            return Reply.html(page(title: "Done", body: "<p>You can return to the app.</p>"))
        default:
            if request.path.hasPrefix("/__sesame") { return admin(request, &state) }
            return Reply.oauthError("invalid_request", "No such endpoint: \(request.path)", status: 404)
        }
    }

    // MARK: Discovery and keys

    /// The claims an ID token or userinfo answer can carry (`claims_supported`).
    static let claimsSupported = [
        "iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "azp", "at_hash", "name", "email", "email_verified",
    ]

    private func discovery(_ state: State) -> JSONValue {
        let issuer = state.issuer
        let authMethods: JSONValue = .array(
            ["client_secret_basic", "client_secret_post", "none"].map { .string($0) })
        return .object([
            "issuer": .string(issuer),
            "authorization_endpoint": .string(issuer + "/authorize"),
            "token_endpoint": .string(issuer + "/token"),
            "userinfo_endpoint": .string(issuer + "/userinfo"),
            "jwks_uri": .string(issuer + "/jwks"),
            "revocation_endpoint": .string(issuer + "/revoke"),
            "device_authorization_endpoint": .string(issuer + "/device_authorization"),
            "response_types_supported": .array([.string("code")]),
            "response_modes_supported": .array([.string("query")]),
            "grant_types_supported": .array(
                ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"].map {
                    .string($0)
                }),
            "subject_types_supported": .array([.string("public")]),
            "authorization_response_iss_parameter_supported": .bool(true),
            "id_token_signing_alg_values_supported": .array([.string(algorithm.rawValue)]),
            "code_challenge_methods_supported": .array([.string("S256")]),
            "scopes_supported": .array(["openid", "profile", "email", "offline_access"].map { .string($0) }),
            "claims_supported": .array(Self.claimsSupported.map { .string($0) }),
            "prompt_values_supported": .array(["none", "consent", "login"].map { .string($0) }),
            "token_endpoint_auth_methods_supported": authMethods,
            "revocation_endpoint_auth_methods_supported": authMethods,
        ])
    }

    private func jwks(_ state: State) -> JSONValue {
        .object([
            "keys": .array(
                state.keys.map { entry in
                    var members: [String: JSONValue] = [
                        "kid": .string(entry.kid), "use": .string("sig"), "alg": .string(algorithm.rawValue),
                    ]
                    for (name, value) in entry.key.publicJWKMembers { members[name] = .string(value) }
                    return .object(members)
                })
        ])
    }

    // MARK: Client authentication

    enum ClientCheck {
        case client(String)
        case refused(Reply)
    }

    /// Who the client is, from HTTP Basic (`client_secret_basic`), the form body
    /// (`client_secret_post`) or `client_id` alone (`none`, public clients) — RFC 6749 §2.3.1.
    private func authenticateClient(_ request: LoopbackRequest, _ state: State) -> ClientCheck {
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

    private func authorize(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        guard let clientID = request["client_id"], let clientSecret = state.clients[clientID] else {
            return Reply.html(
                page(title: "Unknown client", body: "<p>The client_id is not registered.</p>"), status: 400)
        }
        guard let redirect = request["redirect_uri"], let url = URL(string: redirect),
            url.scheme == "http", ["127.0.0.1", "localhost", "[::1]", "::1"].contains(url.host ?? "")
        else {
            return Reply.html(
                page(title: "Bad redirect", body: "<p>redirect_uri must be a loopback http URL (RFC 8252).</p>"),
                status: 400)
        }
        let issuer = state.issuer
        func fail(_ error: String, _ description: String) -> Reply {
            var items = [("error", error), ("error_description", description)]
            if let state = request["state"] { items.append(("state", state)) }
            items.append(("iss", issuer))
            return Reply.redirect(OAuth.appendingQuery(items, to: url).absoluteString)
        }
        guard request["response_type"] == "code" else { return fail("unsupported_response_type", "Only code.") }
        let scope = request["scope"] ?? ""
        guard scope.split(separator: " ").contains("openid") else {
            return fail("invalid_scope", "openid is required.")
        }
        let challenge = request["code_challenge"]
        if clientSecret == nil {
            guard challenge != nil, request["code_challenge_method"] == "S256" else {
                return fail("invalid_request", "Public clients must send a PKCE S256 code_challenge.")
            }
        }
        let pending = Pending(
            clientID: clientID, redirectURI: redirect, state: request["state"], nonce: request["nonce"], scope: scope,
            challenge: challenge)
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
        var body = "<h1>Sign in to \(HTML.escape(clientID))</h1>\n<form method=\"post\" action=\"/authorize\">\n"
        body += "<input type=\"hidden\" name=\"request\" value=\"\(HTML.escape(id))\">\n"
        body += personPicker(state, label: "Continue as")
        body += "<p>\(HTML.escape(clientID)) is requesting access to:</p>\n<ul>\n"
        for name in scope.split(separator: " ") { body += "<li><code>\(HTML.escape(String(name)))</code></li>\n" }
        body += "</ul>\n<div class=\"buttons\">\n"
        body += "<button class=\"primary\" type=\"submit\" name=\"action\" value=\"allow\">Allow</button>\n"
        body += "<button type=\"submit\" name=\"action\" value=\"cancel\">Cancel</button>\n</div>\n</form>\n"
        return Reply.html(page(title: "Sign in to \(clientID)", body: body))
    }

    /// A `<select>` of the people, so a page can be answered as any of them.
    private func personPicker(_ state: State, label: String) -> String {
        var html = "<p><label for=\"user\">\(HTML.escape(label))</label> <select id=\"user\" name=\"user\">\n"
        for person in state.people {
            html += "<option value=\"\(HTML.escape(person.sub))\">\(HTML.escape(person.name))</option>\n"
        }
        return html + "</select></p>\n"
    }

    private func devicePage(prefilled code: String?, _ state: State) -> String {
        var body = "<h1>Sign in on another device</h1><p>Enter the code shown by the app.</p>\n"
        body += "<form method=\"post\" action=\"/device\">\n<p><input name=\"user_code\" autocomplete=\"off\""
        if let code { body += " value=\"\(HTML.escape(code))\"" }
        body += "></p>\n" + personPicker(state, label: "Approve as")
        body += "<div class=\"buttons\"><button class=\"primary\" name=\"action\" value=\"allow\">Allow</button>"
        body += "<button name=\"action\" value=\"deny\">Deny</button></div></form>"
        return page(title: "Enter your code", body: body)
    }

    private func decide(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        guard let id = request["request"], let pending = state.pending.removeValue(forKey: id),
            let url = URL(string: pending.redirectURI)
        else {
            return Reply.html(
                page(title: "Expired", body: "<p>This sign-in request is no longer valid.</p>"), status: 400)
        }
        if request["action"] == "cancel" {
            var items = [("error", "access_denied"), ("error_description", "The person cancelled.")]
            if let value = pending.state { items.append(("state", value)) }
            return issuerRedirect(url, items, &state)
        }
        guard let person = try? Self.person(request["user"], in: state) else {
            return Reply.html(page(title: "Unknown person", body: "<p>No such person.</p>"), status: 400)
        }
        state.consents[pending.clientID + " " + person.sub, default: []].formUnion(
            pending.scope.split(separator: " ").map(String.init))
        return codeRedirect(pending, person: person, authTime: now(state), &state)
    }

    /// Issues a code for `pending` as `person` and sends the browser back with it.
    private func codeRedirect(
        _ pending: Pending, person: Person, authTime: Date, _ state: inout State
    )
        -> Reply
    {
        guard let url = URL(string: pending.redirectURI) else {
            return Reply.html(page(title: "Bad redirect", body: "<p>The redirect_uri is not a URL.</p>"), status: 400)
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
    private func issuerRedirect(_ url: URL, _ items: [(String, String)], _ state: inout State) -> Reply {
        var items = items
        if consume(.redirectNoIssuer, &state) == nil {
            let wrong = consume(.redirectWrongIssuer, &state) != nil
            items.append(("iss", wrong ? "https://another-issuer.example" : state.issuer))
        }
        return Reply.redirect(OAuth.appendingQuery(items, to: url).absoluteString)
    }

    // MARK: Token endpoint

    private func token(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        if let failure = scenarioFailure(at: .serverError, &state) { return failure }
        if consume(.tooManyRequests, &state) != nil {
            var response = Reply.oauthError("temporarily_unavailable", "Too many requests.", status: 429)
            response.headers["Retry-After"] = "7"
            response.body = .json(.object(["message": .string("rate limited")]))
            return response
        }
        let clientID: String
        switch authenticateClient(request, state) {
        case .client(let id): clientID = id
        case .refused(let response): return response
        }
        switch request["grant_type"] {
        case "authorization_code": return codeGrant(request, clientID: clientID, &state)
        case "refresh_token": return refreshGrant(request, clientID: clientID, &state)
        case "urn:ietf:params:oauth:grant-type:device_code": return deviceGrant(request, clientID: clientID, &state)
        default: return Reply.oauthError("unsupported_grant_type", "Unsupported grant_type.")
        }
    }

    private func newGrant(clientID: String, sub: String, scope: String, authTime: Date) -> Grant {
        Grant(
            id: (try? Crypto.randomURLSafeString(byteCount: 12)) ?? UUID().uuidString, clientID: clientID, sub: sub,
            scope: scope, authTime: authTime)
    }

    private func codeGrant(_ request: LoopbackRequest, clientID: String, _ state: inout State) -> Reply {
        guard let code = request["code"], let record = state.codes.removeValue(forKey: code),
            record.pending.clientID == clientID, record.expiresAt > now(state)
        else { return Reply.oauthError("invalid_grant", "The code is invalid, used or expired.") }
        guard request["redirect_uri"] == record.pending.redirectURI else {
            return Reply.oauthError("invalid_grant", "redirect_uri does not match the authorization request.")
        }
        if let challenge = record.pending.challenge {
            guard let verifier = request["code_verifier"],
                OAuth.constantTimeEquals(PKCE.challenge(for: verifier), challenge)
            else {
                return Reply.oauthError("invalid_grant", "The PKCE code_verifier does not match.")
            }
        }
        let grant = newGrant(
            clientID: clientID, sub: record.sub, scope: record.pending.scope, authTime: record.authTime)
        return issue(grant, nonce: record.pending.nonce, &state)
    }

    private func refreshGrant(_ request: LoopbackRequest, clientID: String, _ state: inout State) -> Reply {
        guard let token = request["refresh_token"], let grant = state.refreshTokens[token], grant.clientID == clientID
        else { return Reply.oauthError("invalid_grant", "The refresh token is invalid or was revoked.") }
        // RFC 6749 §6: a refresh may narrow the scope, never widen it; the refresh token keeps the
        // grant's whole scope.
        var narrowed = grant
        if let asked = request["scope"] {
            let granted = Set(grant.scope.split(separator: " "))
            let wanted = asked.split(separator: " ")
            guard Set(wanted).isSubset(of: granted) else {
                return Reply.oauthError(
                    "invalid_scope", "A refresh may only ask for scopes of the original grant (\(grant.scope)).")
            }
            narrowed.scope = wanted.joined(separator: " ")
        }
        if consume(.refreshRevoked, &state) != nil {
            state.refreshTokens[token] = nil
            return Reply.oauthError("invalid_grant", "The refresh token was revoked.")
        }
        state.refreshTokens[token] = nil  // Rotation: each refresh token works once.
        return issue(narrowed, refreshGrant: grant, nonce: nil, &state)
    }

    private func deviceGrant(_ request: LoopbackRequest, clientID: String, _ state: inout State) -> Reply {
        guard let code = request["device_code"], let device = state.devices[code], device.clientID == clientID else {
            return Reply.oauthError("invalid_grant", "Unknown device_code.")
        }
        if device.expiresAt <= now(state) { return Reply.oauthError("expired_token", "The device code expired.") }
        if consume(.slowDown, &state) != nil { return Reply.oauthError("slow_down", "Poll more slowly.") }
        if device.denied {
            state.devices[code] = nil
            return Reply.oauthError("access_denied", "The person declined.")
        }
        guard let sub = device.approvedFor else {
            return Reply.oauthError("authorization_pending", "The person has not finished yet.")
        }
        state.devices[code] = nil
        let grant = newGrant(
            clientID: clientID, sub: sub, scope: device.scope, authTime: device.approvedAt ?? now(state))
        return issue(grant, nonce: nil, &state)
    }

    private func deviceAuthorization(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        let clientID: String
        switch authenticateClient(request, state) {
        case .client(let id): clientID = id
        case .refused(let response): return response
        }
        let deviceCode = (try? Crypto.randomURLSafeString(byteCount: 24)) ?? UUID().uuidString
        let letters = Array("BCDFGHJKLMNPQRSTVWXZ")
        let userCode = String((0..<8).map { _ in letters.randomElement()! }).enumerated().map {
            $0.offset == 4 ? "-\($0.element)" : "\($0.element)"
        }.joined()
        state.devices[deviceCode] = Device(
            clientID: clientID, userCode: userCode, scope: request["scope"] ?? "openid",
            expiresAt: now(state).addingTimeInterval(600))
        let complete = OAuth.appendingQuery([("user_code", userCode)], to: URL(string: state.issuer + "/device")!)
        return Reply.json(
            .object([
                "device_code": .string(deviceCode), "user_code": .string(userCode),
                "verification_uri": .string(state.issuer + "/device"),
                "verification_uri_complete": .string(complete.absoluteString),
                "expires_in": .number(600), "interval": .number(Double(state.devicePollInterval)),
            ]))
    }

    /// Issues an access token for `grant` and a refresh token for `refreshGrant` (the same grant
    /// unless a refresh narrowed the access token's scope), with an ID token when `openid` is in scope.
    private func issue(
        _ grant: Grant, refreshGrant: Grant? = nil, nonce: String?, _ state: inout State
    )
        -> Reply
    {
        let access = "at-" + ((try? Crypto.randomURLSafeString(byteCount: 32)) ?? UUID().uuidString)
        let refresh = "rt-" + ((try? Crypto.randomURLSafeString(byteCount: 32)) ?? UUID().uuidString)
        state.accessTokens[access] = (grant, now(state).addingTimeInterval(accessTokenLifetime))
        state.refreshTokens[refresh] = refreshGrant ?? grant
        var body: [String: JSONValue] = [
            "access_token": .string(access), "token_type": .string("Bearer"),
            "expires_in": .number(accessTokenLifetime), "refresh_token": .string(refresh),
            "scope": .string(grant.scope),
        ]
        if grant.scope.split(separator: " ").contains("openid") {
            do {
                body["id_token"] = .string(try idToken(for: grant, nonce: nonce, accessToken: access, &state))
            } catch {
                return Reply.oauthError("server_error", "The ID token could not be signed.", status: 500)
            }
        }
        return Reply.json(.object(body))
    }

    /// Seconds since 1970, rounded down: a time rounded up would be in the future for up to half
    /// a second, and clients with no leeway refuse an `iat` in the future.
    static func epochSeconds(_ date: Date) -> JSONValue {
        .number(date.timeIntervalSince1970.rounded(.down))
    }

    /// `at_hash` (Core §3.1.3.6): the left half of the SHA-256 of the access token, base64url.
    static func accessTokenHash(_ token: String) -> String {
        Base64URL.encode(Crypto.sha256(Data(token.utf8)).prefix(16))
    }

    private func idToken(for grant: Grant, nonce: String?, accessToken: String, _ state: inout State) throws -> String {
        let person = state.people.first { $0.sub == grant.sub } ?? state.people[0]
        let skew = TimeInterval(state.scenarios.first { $0.setting.scenario == .clockSkew }?.setting.seconds ?? 0)
        let issuedAt = now(state).addingTimeInterval(skew)
        var expiresAt = issuedAt.addingTimeInterval(3600)
        var claims: [String: JSONValue] = [
            "iss": .string(state.issuer), "sub": .string(person.sub), "aud": .string(grant.clientID),
            "azp": .string(grant.clientID), "iat": Self.epochSeconds(issuedAt),
            "auth_time": Self.epochSeconds(grant.authTime.addingTimeInterval(skew)),
            "at_hash": .string(Self.accessTokenHash(accessToken)), "name": .string(person.name),
            "email": .string(person.email),
        ]
        if let nonce { claims["nonce"] = .string(nonce) }
        if consume(.wrongIssuer, &state) != nil { claims["iss"] = .string("https://impostor.example") }
        if consume(.wrongAudience, &state) != nil { claims["aud"] = .string("someone-else") }
        if consume(.expiredIDToken, &state) != nil { expiresAt = issuedAt.addingTimeInterval(-3600) }
        if consume(.wrongNonce, &state) != nil { claims["nonce"] = .string("not-the-nonce-you-sent") }
        claims["exp"] = Self.epochSeconds(expiresAt)
        var signer = state.keys[0]
        if consume(.unknownKey, &state) != nil {
            signer = (kid: "key-not-published", key: try SignatureSigningKey(generating: algorithm))
        }
        let header: JSONValue = .object([
            "alg": .string(algorithm.rawValue), "kid": .string(signer.kid), "typ": .string("JWT"),
        ])
        let input = Base64URL.encode(header.jsonData) + "." + Base64URL.encode(JSONValue.object(claims).jsonData)
        var signature = try signer.key.sign(Data(input.utf8))
        if consume(.badSignature, &state) != nil { signature[signature.startIndex] ^= 0x01 }
        return input + "." + Base64URL.encode(signature)
    }

    // MARK: Userinfo and revocation

    private func userinfo(_ request: LoopbackRequest, _ state: State) -> Reply {
        let header = request.headers["Authorization"] ?? ""
        let headerToken = header.lowercased().hasPrefix("bearer ") ? String(header.dropFirst(7)).trimmedASCII : nil
        // RFC 6750 §2.2: the token may come in a form body instead of the header.
        let formToken = request.form.first { $0.0 == "access_token" }?.1
        if headerToken != nil, formToken != nil {
            return Self.bearerError(
                "invalid_request", "The access token was sent twice (header and body).", status: 400)
        }
        guard let token = headerToken ?? formToken, !token.isEmpty else {
            // RFC 6750 §3.1: a request without credentials gets no error code.
            return Reply.empty(status: 401, headers: ["WWW-Authenticate": "Bearer realm=\"sesame\""])
        }
        guard let record = state.accessTokens[token], record.expiresAt > now(state) else {
            return Self.bearerError("invalid_token", "The access token is invalid or expired", status: 401)
        }
        let person = state.people.first { $0.sub == record.grant.sub } ?? state.people[0]
        var claims: [String: JSONValue] = ["sub": .string(person.sub)]
        let scopes = record.grant.scope.split(separator: " ")
        if scopes.contains("profile") { claims["name"] = .string(person.name) }
        if scopes.contains("email") {
            claims["email"] = .string(person.email)
            claims["email_verified"] = .bool(true)
        }
        return Reply.json(.object(claims))
    }

    static func bearerError(_ error: String, _ description: String, status: Int) -> Reply {
        Reply.empty(
            status: status,
            headers: [
                "WWW-Authenticate":
                    "Bearer realm=\"sesame\", error=\"\(error)\", error_description=\"\(description)\""
            ])
    }

    private func revoke(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        let clientID: String
        switch authenticateClient(request, state) {
        case .client(let id): clientID = id
        case .refused(let response): return response
        }
        guard let token = request["token"] else { return Reply.oauthError("invalid_request", "token is required.") }
        // RFC 7009 §2.1: revoking a refresh token revokes the access tokens of the same grant;
        // a token of another client is left alone (and still answered with 200).
        if let grant = state.refreshTokens[token], grant.clientID == clientID {
            state.refreshTokens[token] = nil
            for (access, record) in state.accessTokens where record.grant.id == grant.id {
                state.accessTokens[access] = nil
                state.revokedCount += 1
            }
            state.revokedCount += 1
        } else if let record = state.accessTokens[token], record.grant.clientID == clientID {
            state.accessTokens[token] = nil
            state.revokedCount += 1
        }
        return Reply.empty(status: 200)
    }

    // MARK: Admin

    private func admin(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        let json = request.json
        switch (request.method, request.path) {
        case (.post, "/__sesame/scenarios"):
            guard let name = json?["scenario"]?.stringValue, let scenario = OIDCScenario(rawValue: name) else {
                return Reply.json(
                    .object([
                        "error": .string(
                            "Name a scenario: " + OIDCScenario.allCases.map(\.rawValue).joined(separator: ", "))
                    ]), status: 400)
            }
            let setting = OIDCScenarioSetting(
                scenario, count: json?["count"]?.lenientInt, seconds: json?["seconds"]?.lenientInt ?? 0)
            if scenario == .keyRotated {
                guard let key = try? SignatureSigningKey(generating: algorithm) else {
                    return Reply.json(.object(["error": .string("Key generation failed.")]), status: 500)
                }
                state.keys.insert((kid: "key-\(state.nextKeyNumber)", key: key), at: 0)
                state.nextKeyNumber += 1
            } else {
                state.scenarios.append(Scenario(setting: setting, remaining: setting.count ?? 1))
            }
            return Reply.json(.object(["scenario": .string(name)]), status: 201)
        case (.delete, "/__sesame/scenarios"):
            state.scenarios.removeAll()
            return Reply.json(.object(["cleared": .bool(true)]))
        case (.post, "/__sesame/device"):
            guard let userCode = json?["user_code"]?.stringValue,
                let code = Self.deviceCode(matching: userCode, in: state)
            else { return Reply.json(.object(["error": .string("No device login has that user_code.")]), status: 404) }
            guard let person = try? Self.person(json?["user"]?.stringValue, in: state) else {
                return Reply.json(.object(["error": .string("No such person.")]), status: 404)
            }
            Self.answer(device: code, as: person, approve: json?["action"]?.stringValue != "deny", &state)
            return Reply.json(.object(["user_code": .string(userCode)]))
        case (.post, "/__sesame/clients"):
            guard let id = json?["client_id"]?.stringValue, !id.isEmpty, id.utf8.count <= 200 else {
                return Reply.json(
                    .object([
                        "error": .string(
                            "Send {\"client_id\": \"…\", \"client_secret\": \"…\"}; without a secret the client is public."
                        )
                    ]), status: 400)
            }
            let secret = json?["client_secret"]?.stringValue
            state.clients[id] = .some(secret)
            return Reply.json(
                .object(["client_id": .string(id), "confidential": .bool(secret != nil)]), status: 201)
        case (.post, "/__sesame/clock"):
            state.clockOffset += json?["advance"]?.doubleValue ?? 0
            return Reply.json(.object(["offset": .number(state.clockOffset)]))
        default:
            return Reply.json(.object(["error": .string("No such admin endpoint.")]), status: 404)
        }
    }

    // MARK: Helpers

    private func now(_ state: State) -> Date { Date().addingTimeInterval(state.clockOffset) }

    /// Takes one use of the first active `scenario`; `nil` when none is active.
    private func consume(_ scenario: OIDCScenario, _ state: inout State) -> OIDCScenarioSetting? {
        state.scenarios.consumeFirst { $0.scenario == scenario }
    }

    private func scenarioFailure(at scenario: OIDCScenario, _ state: inout State) -> Reply? {
        guard consume(scenario, &state) != nil else { return nil }
        return Reply.oauthError("server_error", "The emulator was told to fail.", status: 500)
    }

    private func page(title: String, body: String) -> String {
        HTML.page(
            title: title, body: body, header: "OpenID <small>Sesame emulator: not a real identity provider</small>")
    }
}
