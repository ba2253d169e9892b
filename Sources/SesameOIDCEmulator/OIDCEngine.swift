import Foundation
import Sesame
import SesameEmulator

/// The OIDC emulator's state and request handling. Every request is handled under one lock,
/// without suspending; a signing key a request needs is made before the lock is taken.
final class OIDCEngine: LoopbackEngine {
    struct Person: Sendable {
        var sub: String
        var name: String
        var email: String
        /// The person's Microsoft tenant (`tid`), under Microsoft's quirks.
        var tenant: String?
    }
    struct Pending: Sendable {
        var clientID: String
        var redirectURI: String
        var state: String?
        var nonce: String?
        var scope: String
        var challenge: String?
        /// The authorization request's parameters, for what a provider's quirks read at the
        /// token endpoint (Google's `access_type`, Dropbox's `token_access_type`).
        var parameters: [String: String] = [:]
    }
    struct Code: Sendable {
        var pending: Pending
        var sub: String
        var expiresAt: Date
        var authTime: Date
    }
    /// One person's consent to one client: every token issued from it shares its `id`, so that
    /// revoking its refresh token revokes its access tokens too (RFC 7009 §2.1), and a used
    /// refresh token that comes back revokes them all (the token family, RFC 9700 §4.14.2).
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
    struct State: LoopbackState {
        var issuer = "http://127.0.0.1"
        var clients: [String: String?]
        var people: [Person]
        /// The published signing keys, newest (the one that signs) first; the first is made when
        /// the emulator starts (``OIDCEngine/prepareKeys()``).
        var keys: [(kid: String, key: SignatureSigningKey)] = []
        /// The key the `id-token-unknown-key` scenario signs with, published nowhere; made when
        /// the scenario is activated.
        var unpublishedKey: SignatureSigningKey?
        var pending: [String: Pending] = [:]
        var codes: [String: Code] = [:]
        var accessTokens: [String: (grant: Grant, expiresAt: Date)] = [:]
        var refreshTokens: [String: (grant: Grant, expiresAt: Date)] = [:]
        /// The refresh tokens each grant rotated away, and the refresh counters.
        var families = RefreshFamilies()
        var devices: [String: Device] = [:]
        var scenarios: [Scenario] = []
        var clockOffset: TimeInterval = 0
        var revokedCount = 0
        /// Seconds a device authorization asks clients to wait between polls.
        var devicePollInterval = 5
        /// Whether device login is offered: when off, discovery names no device endpoint and the
        /// endpoint answers 404, as at an issuer without RFC 8628.
        var deviceLoginEnabled = true
        /// Where the revocation endpoint is listed; when nowhere, it answers 404.
        var revocationListing = OIDCRevocationListing.discovery
        var requestCounts: [String: Int] = [:]
        var nextKeyNumber = 2
        /// The scopes each person consented to, per client (`"client sub"`), for `prompt=none`.
        var consents: [String: Set<String>] = [:]
        /// The provider whose documented behaviour the emulator reproduces (OIDCEngine+Quirks).
        var quirks: OIDCQuirks?
        /// The people and clients Google gave a refresh token, `"client sub"`: Google gives one
        /// again only with `prompt=consent`.
        var offlineGrants: Set<String> = []
        /// Client keys and trusted subject-token issuers, for logins with no person.
        var machineClients = OIDCMachineClients()
    }

    let algorithm: SignatureAlgorithm
    let accessTokenLifetime: TimeInterval
    /// Seconds a refresh token lives from when it is issued (`refresh_token_expires_in`).
    let refreshTokenLifetime: TimeInterval
    /// Seconds from an ID token's `iat` to its `exp`.
    let idTokenLifetime: TimeInterval
    private let state: Locked<State>

    init(
        algorithm: SignatureAlgorithm, clients: [String: String?], accessTokenLifetime: TimeInterval,
        refreshTokenLifetime: TimeInterval = OIDCEmulator.defaultRefreshTokenLifetime,
        idTokenLifetime: TimeInterval = 3600
    ) {
        self.algorithm = algorithm
        self.accessTokenLifetime = accessTokenLifetime
        self.refreshTokenLifetime = refreshTokenLifetime
        self.idTokenLifetime = idTokenLifetime
        var all = clients
        all[OIDCEmulator.defaultClientID] = .some(nil)
        state = Locked(
            State(
                clients: all,
                people: [
                    Person(sub: "248289761001", name: "Alice Example", email: "alice@example.com"),
                    Person(sub: "248289761002", name: "Bob Example", email: "bob@example.com"),
                ]))
    }

    /// Makes the first signing key, `key-1`, unless there is one. Keys are made on a thread of
    /// their own, never under the lock (``SignatureSigningKey/generated(_:)``).
    func prepareKeys() async throws {
        guard locked({ $0.keys.isEmpty }) else { return }
        let key = try await SignatureSigningKey.generated(algorithm)
        locked { state in
            if state.keys.isEmpty { state.keys = [(kid: "key-1", key: key)] }
        }
    }

    /// Whether activating `scenario` needs a new key made first.
    static func needsKey(_ scenario: OIDCScenario) -> Bool { scenario == .keyRotated || scenario == .unknownKey }

    /// Activates `setting` with the key made for it (``needsKey(_:)``): a rotation publishes the
    /// key as the newest one and is done; the unknown-key scenario keeps its key unpublished;
    /// every other scenario is added with `remaining` answers (`nil`: until cleared).
    static func activate(
        _ setting: OIDCScenarioSetting, key: SignatureSigningKey?, remaining: Int?, _ state: inout State
    ) {
        if setting.scenario == .keyRotated, let key {
            state.keys.insert((kid: "key-\(state.nextKeyNumber)", key: key), at: 0)
            state.nextKeyNumber += 1
            return
        }
        if setting.scenario == .unknownKey { state.unpublishedKey = key }
        state.scenarios.append(Scenario(setting: setting, remaining: remaining))
    }

    func locked<T>(_ body: (inout State) throws -> T) rethrows -> T { try state.withLock { try body(&$0) } }

    func setIssuer(_ issuer: String) { locked { $0.issuer = issuer } }

    func activate(_ setting: OIDCScenarioSetting) async throws {
        let fresh = Self.needsKey(setting.scenario) ? try await SignatureSigningKey.generated(algorithm) : nil
        let oneShot: Set<OIDCScenario> = [
            .badSignature, .wrongIssuer, .wrongAudience, .expiredIDToken, .wrongNonce, .unknownKey, .refreshRevoked,
            .redirectWrongIssuer, .redirectNoIssuer, .wrongTenant,
        ]
        let remaining = setting.count ?? (oneShot.contains(setting.scenario) ? 1 : nil)
        locked { state in Self.activate(setting, key: fresh, remaining: remaining, &state) }
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

    /// Counts the request and answers it, under the lock. A scenario that needs a new key has
    /// it made first, outside the lock.
    func reply(to request: LoopbackRequest) async -> Reply {
        var key: SignatureSigningKey?
        if request.method == .post, request.path == "/__sesame/scenarios",
            let scenario = request.json?["scenario"]?.stringValue.flatMap(OIDCScenario.init(rawValue:)),
            Self.needsKey(scenario)
        {
            guard let made = try? await SignatureSigningKey.generated(algorithm) else {
                return Reply.json(.object(["error": .string("Key generation failed.")]), status: 500)
            }
            key = made
        }
        return locked { state in
            state.requestCounts[request.path, default: 0] += 1
            if let key { return admin(request, madeKey: key, &state) }
            return route(request, &state)
        }
    }

    func route(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        if let reply = quirkRoute(request, &state) { return reply }
        switch (request.method, request.path) {
        case (.get, "/.well-known/openid-configuration"): return Reply.json(discovery(state))
        // RFC 8414 §3: an issuer without a path has its metadata right under the host.
        case (.get, "/.well-known/oauth-authorization-server"): return Reply.json(metadata(state))
        case (.get, "/jwks"): return Reply.json(jwks(state))
        case (.get, "/authorize"): return authorize(request, &state)
        // Core §3.1.2.1: the authorization request may be form-POSTed; the consent page posts
        // its decision to the same place, without a response_type.
        case (.post, "/authorize"):
            return request["response_type"] == nil ? decide(request, &state) : authorize(request, &state)
        case (.post, "/token"): return token(request, &state)
        case (.post, "/device_authorization") where state.deviceLoginEnabled:
            return deviceAuthorization(request, &state)
        case (.get, "/userinfo"), (.post, "/userinfo"): return userinfo(request, state)
        case (.post, "/revoke") where state.revocationListing != .nowhere: return revoke(request, &state)
        case (.get, "/device"):
            let people = state.people
            return Reply.html(Self.devicePage(prefilled: request["user_code"], people: people))
        case (.post, "/device"):
            guard let code = request["user_code"] else {
                return Reply.html(
                    Self.page(title: "No code", body: "<p>Enter the code the app shows.</p>"), status: 400)
            }
            guard let deviceCode = Self.deviceCode(matching: code, in: state) else {
                return Reply.html(
                    Self.page(title: "Unknown code", body: "<p>That code is not valid, or it expired.</p>"), status: 400
                )
            }
            guard let person = try? Self.person(request["user"], in: state) else {
                return Reply.html(Self.page(title: "Unknown person", body: "<p>No such person.</p>"), status: 400)
            }
            Self.answer(device: deviceCode, as: person, approve: request["action"] != "deny", &state)
            return Reply.html(Self.page(title: "Done", body: "<p>You can return to the app.</p>"))
        default:
            if request.path.hasPrefix("/__sesame") { return admin(request, &state) }
            if request.path.hasPrefix("/resource/") { return protectedResource(request, state) }
            return Reply.oauthError("invalid_request", "No such endpoint: \(request.path)", status: 404)
        }
    }

    // MARK: Discovery and keys

    /// The claims an ID token or userinfo answer can carry (`claims_supported`).
    static let claimsSupported = [
        "iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "azp", "at_hash", "name", "email", "email_verified",
    ]

    func discovery(_ state: State) -> JSONValue {
        let issuer = state.issuer
        let authMethods: JSONValue = .array(
            (["client_secret_basic", "client_secret_post", "none"]
                + (state.machineClients.keys.isEmpty ? [] : ["private_key_jwt"])).map { .string($0) })
        let grants =
            ["authorization_code", "refresh_token", "client_credentials"]
            + (state.deviceLoginEnabled ? ["urn:ietf:params:oauth:grant-type:device_code"] : [])
        var document: [String: JSONValue] = [
            "issuer": .string(issuer),
            "authorization_endpoint": .string(issuer + "/authorize"),
            "token_endpoint": .string(issuer + "/token"),
            "userinfo_endpoint": .string(issuer + "/userinfo"),
            "jwks_uri": .string(issuer + "/jwks"),
            "response_types_supported": .array([.string("code")]),
            "response_modes_supported": .array([.string("query")]),
            "grant_types_supported": .array(grants.map { .string($0) }),
            "subject_types_supported": .array([.string("public")]),
            "authorization_response_iss_parameter_supported": .bool(true),
            "id_token_signing_alg_values_supported": .array([.string(algorithm.rawValue)]),
            "code_challenge_methods_supported": .array([.string("S256")]),
            "scopes_supported": .array(["openid", "profile", "email", "offline_access"].map { .string($0) }),
            "claims_supported": .array(Self.claimsSupported.map { .string($0) }),
            "prompt_values_supported": .array(["none", "consent", "login"].map { .string($0) }),
            "token_endpoint_auth_methods_supported": authMethods,
            "revocation_endpoint_auth_methods_supported": authMethods,
        ]
        if state.deviceLoginEnabled {
            document["device_authorization_endpoint"] = .string(issuer + "/device_authorization")
        }
        if state.revocationListing == .discovery { document["revocation_endpoint"] = .string(issuer + "/revoke") }
        return .object(document)
    }

    /// The RFC 8414 authorization server metadata: the OAuth members of the discovery document,
    /// with the revocation endpoint unless it is listed nowhere (django-oauth-toolkit lists it
    /// only here).
    func metadata(_ state: State) -> JSONValue {
        var document = discovery(state).objectValue ?? [:]
        for name in ["userinfo_endpoint", "subject_types_supported", "id_token_signing_alg_values_supported"] {
            document[name] = nil
        }
        if state.revocationListing != .nowhere { document["revocation_endpoint"] = .string(state.issuer + "/revoke") }
        return .object(document)
    }

    func jwks(_ state: State) -> JSONValue {
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

    // MARK: Admin

    /// The admin API. `madeKey` is the key made for a scenario that needs one (``needsKey(_:)``).
    func admin(_ request: LoopbackRequest, madeKey: SignatureSigningKey? = nil, _ state: inout State) -> Reply {
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
            if Self.needsKey(scenario) && madeKey == nil {
                return Reply.json(.object(["error": .string("Key generation failed.")]), status: 500)
            }
            Self.activate(setting, key: madeKey, remaining: setting.count ?? 1, &state)
            return Reply.json(.object(["scenario": .string(name)]), status: 201)
        case (.post, "/__sesame/device"):
            guard let userCode = json?["user_code"]?.stringValue,
                let code = Self.deviceCode(matching: userCode, in: state)
            else { return Reply.json(.object(["error": .string("No device login has that user_code.")]), status: 404) }
            guard let person = try? Self.person(json?["user"]?.stringValue, in: state) else {
                return Reply.json(.object(["error": .string("No such person.")]), status: 404)
            }
            Self.answer(device: code, as: person, approve: json?["action"]?.stringValue != "deny", &state)
            return Reply.json(.object(["user_code": .string(userCode)]))
        case (.post, "/__sesame/device-login"):
            guard let enabled = json?["enabled"]?.boolValue else {
                return Reply.json(
                    .object(["error": .string("Send {\"enabled\": false} (or true) to turn device login off or on.")]),
                    status: 400)
            }
            state.deviceLoginEnabled = enabled
            return Reply.json(.object(["device_login": .bool(enabled)]))
        case (.post, "/__sesame/revocation"):
            guard let listing = json?["listed"]?.stringValue.flatMap(OIDCRevocationListing.init(rawValue:)) else {
                return Reply.json(
                    .object(["error": .string("Send {\"listed\": \"discovery\"}, \"metadata\" or \"nowhere\".")]),
                    status: 400)
            }
            state.revocationListing = listing
            return Reply.json(.object(["listed": .string(listing.rawValue)]))
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
        default:
            return state.commonAdmin(request, stats: Self.stats)
                ?? Reply.json(.object(["error": .string("No such admin endpoint.")]), status: 404)
        }
    }

    /// `GET /__sesame/stats`: the refresh counters, tokens revoked at the revocation endpoint,
    /// the clock's offset and the requests per path.
    static func stats(_ state: State) -> [String: JSONValue] {
        var members = state.statsMembers
        members["revoked_tokens"] = .number(Double(state.revokedCount))
        return members
    }

    // MARK: Helpers

    func now(_ state: State) -> Date { state.now }

    /// Takes one use of the first active `scenario`; `nil` when none is active.
    func consume(_ scenario: OIDCScenario, _ state: inout State) -> OIDCScenarioSetting? {
        state.scenarios.consumeFirst { $0.scenario == scenario }
    }

    func scenarioFailure(at scenario: OIDCScenario, _ state: inout State) -> Reply? {
        guard consume(scenario, &state) != nil else { return nil }
        return Reply.oauthError("server_error", "The emulator was told to fail.", status: 500)
    }

    static func page(title: String, body: String) -> String {
        HTML.page(
            title: title, body: body, header: "OpenID <small>Sesame emulator: not a real identity provider</small>")
    }
}
