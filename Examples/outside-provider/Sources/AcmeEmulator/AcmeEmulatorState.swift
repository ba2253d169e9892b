import Foundation
import Sesame
import SesameHTTPServer

/// Everything the emulator knows, behind its lock. Only ``saved`` outlives a run.
struct AcmeEmulatorState: Sendable {
    /// A grant a token carries.
    struct Grant: Sendable, Codable {
        var user: String
        var clientID: String
        var scopes: [String]
        var expires: Date?
        /// The refresh-token family (one login) the token belongs to.
        var family: String
    }

    /// What is kept between runs: the tokens issued, and the clock.
    struct Saved: Sendable, Codable {
        var accessTokens: [String: Grant] = [:]
        var refreshTokens: [String: Grant] = [:]
        /// Refresh tokens already exchanged, by family: one that comes back revokes its family.
        var usedRefreshTokens: [String: String] = [:]
        var clockOffset: TimeInterval = 0
        var refreshGrants = 0
        var refusedRefreshGrants = 0
    }

    /// An authorization code waiting to be exchanged.
    struct Code: Sendable {
        var grant: Grant
        var redirectURI: String
        var challenge: String
        var expires: Date
    }

    /// A device login.
    struct Device: Sendable {
        enum Answer: Sendable { case pending, approved(String), denied }
        var clientID: String
        var userCode: String
        var scopes: [String]
        var expires: Date
        var answer: Answer = .pending
    }

    var saved = Saved()
    var baseURL: URL?
    var codes: [String: Code] = [:]
    var devices: [String: Device] = [:]
    var requestCounts: [String: Int] = [:]
    /// Tokens revoked in this run: a saved state merged in later does not bring them back.
    var removed: Set<String> = []

    var clockOffset: TimeInterval {
        get { saved.clockOffset }
        set { saved.clockOffset = newValue }
    }

    var now: Date { Date().addingTimeInterval(saved.clockOffset) }

    mutating func merge(_ other: Saved) {
        for (token, grant) in other.accessTokens where !removed.contains(token) {
            saved.accessTokens[token] = saved.accessTokens[token] ?? grant
        }
        for (token, family) in other.usedRefreshTokens {
            saved.usedRefreshTokens[token] = family
            saved.refreshTokens[token] = nil
        }
        for (token, grant) in other.refreshTokens
        where saved.usedRefreshTokens[token] == nil && !removed.contains(token) {
            saved.refreshTokens[token] = saved.refreshTokens[token] ?? grant
        }
        saved.clockOffset = max(saved.clockOffset, other.clockOffset)
        saved.refreshGrants = max(saved.refreshGrants, other.refreshGrants)
        saved.refusedRefreshGrants = max(saved.refusedRefreshGrants, other.refusedRefreshGrants)
    }

    mutating func revokeAll() {
        removeTokens { _ in true }
        codes.removeAll()
    }

    /// Removes every access and refresh token whose grant `matches`, for good.
    mutating func removeTokens(where matches: (Grant) -> Bool) {
        for (token, grant) in saved.accessTokens where matches(grant) {
            saved.accessTokens[token] = nil
            removed.insert(token)
        }
        for (token, grant) in saved.refreshTokens where matches(grant) {
            saved.refreshTokens[token] = nil
            removed.insert(token)
        }
    }

    static func random(_ prefix: String) -> String {
        prefix + ((try? Crypto.randomURLSafeString(byteCount: 24)) ?? UUID().uuidString)
    }

    static func user(_ login: String?) -> AcmeEmulatorUser? {
        guard let login else { return AcmeEmulator.users.first }
        return AcmeEmulator.users.first { $0.login == login || $0.id == login }
    }

    /// The scopes asked for, or `nil` when one is unknown; `read` when none are asked for.
    static func scopes(_ text: String?) -> [String]? {
        let asked = (text ?? "").split(separator: " ").map(String.init)
        guard asked.allSatisfy(AcmeEmulator.scopes.contains) else { return nil }
        return asked.isEmpty ? ["read"] : Array(Set(asked)).sorted()
    }

    static func oauthError(_ error: String, _ description: String, _ status: Int = 400) -> HTTPServerResponse {
        var response = HTTPServerResponse.json(
            JSONValue.object(["error": .string(error), "error_description": .string(description)]), status: status)
        response.headers["Cache-Control"] = "no-store"
        if status == 401 { response.headers["WWW-Authenticate"] = "Bearer error=\"\(error)\"" }
        return response
    }

    // MARK: Browser login

    enum Authorization {
        /// Where the browser goes next: back to the app, with a code or an error.
        case redirect(URL)
        /// The consent page, for a request that can go on and is not answered yet.
        case consent(String)
        /// A request that cannot be sent back to the app (an unknown client, a redirect that is
        /// not a loopback address): said on a page.
        case refused(String)
    }

    /// Reads an authorization request and answers it with `decision` (`allow` issues a code,
    /// anything else is `access_denied`), or, with none, offers the consent page.
    mutating func authorize(
        _ parameters: Parameters, clientIDs: Set<String>, decision: String?, user: String?
    ) -> Authorization {
        guard let clientID = value("client_id", parameters), clientIDs.contains(clientID) else {
            return .refused("Acme does not know this app (client_id).")
        }
        guard let redirect = value("redirect_uri", parameters), let redirectURL = URL(string: redirect),
            redirectURL.scheme == "http", EndpointSecurity.isLoopback(redirectURL.host ?? "")
        else { return .refused("The app's redirect_uri must be a loopback address (http://127.0.0.1:PORT/...).") }
        let state = value("state", parameters)
        func back(_ items: [(String, String)]) -> Authorization {
            .redirect(OAuth.appendingQuery(items + (state.map { [("state", $0)] } ?? []), to: redirectURL))
        }
        guard value("response_type", parameters) == "code" else {
            return back([("error", "unsupported_response_type")])
        }
        guard let challenge = value("code_challenge", parameters), value("code_challenge_method", parameters) == "S256"
        else {
            return back([("error", "invalid_request"), ("error_description", "PKCE with S256 is required.")])
        }
        guard let scopes = Self.scopes(value("scope", parameters)) else {
            return back([("error", "invalid_scope"), ("error_description", "Acme knows read, write and profile.")])
        }
        guard let decision else {
            return .consent(Page.consent(parameters: parameters, clientID: clientID, scopes: scopes))
        }
        guard decision == "allow", let person = Self.user(user) else {
            return back([("error", "access_denied"), ("error_description", "The person declined.")])
        }
        let code = Self.random("ac_")
        codes[code] = Code(
            grant: Grant(user: person.id, clientID: clientID, scopes: scopes, family: Self.random("f_")),
            redirectURI: redirect, challenge: challenge, expires: now.addingTimeInterval(600))
        return back([("code", code)])
    }

    // MARK: Device login

    mutating func startDevice(_ parameters: Parameters, clientIDs: Set<String>, interval: Int) -> HTTPServerResponse {
        guard let clientID = value("client_id", parameters), clientIDs.contains(clientID) else {
            return Self.oauthError("invalid_client", "Acme does not know this client.", 401)
        }
        guard let scopes = Self.scopes(value("scope", parameters)) else {
            return Self.oauthError("invalid_scope", "Acme knows read, write and profile.")
        }
        let alphabet = Array("BCDFGHJKLMNPQRSTVWXZ")
        let letters = String((0..<8).map { _ in alphabet.randomElement()! })
        let userCode = "\(letters.prefix(4))-\(letters.suffix(4))"
        let deviceCode = Self.random("dc_")
        devices[deviceCode] = Device(
            clientID: clientID, userCode: userCode, scopes: scopes, expires: now.addingTimeInterval(600))
        let base = baseURL?.absoluteString ?? "http://127.0.0.1"
        return .json(
            JSONValue.object([
                "device_code": .string(deviceCode), "user_code": .string(userCode),
                "verification_uri": .string("\(base)/device"),
                "verification_uri_complete": .string("\(base)/device?user_code=\(userCode)"),
                "expires_in": .number(600), "interval": .number(Double(interval)),
            ]))
    }

    mutating func answerDevice(userCode: String, user: String?, approve: Bool) throws {
        let typed = userCode.uppercased().filter { $0.isLetter }
        guard
            let (deviceCode, device) = devices.first(where: {
                $0.value.userCode.filter(\.isLetter) == typed && $0.value.expires > now
            })
        else { throw AcmeEmulatorError(message: "No device login is waiting for the code '\(userCode)'.") }
        guard case .pending = device.answer else {
            throw AcmeEmulatorError(message: "The device login with code '\(userCode)' was answered already.")
        }
        guard let person = Self.user(user) else {
            throw AcmeEmulatorError(message: "The Acme emulator knows no person '\(user ?? "")'.")
        }
        devices[deviceCode]?.answer = approve ? .approved(person.id) : .denied
    }

    // MARK: Tokens

    mutating func token(_ parameters: Parameters, clientIDs: Set<String>, lifetime: Double) -> HTTPServerResponse {
        guard let clientID = value("client_id", parameters), clientIDs.contains(clientID) else {
            return Self.oauthError("invalid_client", "Acme does not know this client.", 401)
        }
        switch value("grant_type", parameters) {
        case "authorization_code":
            guard let code = value("code", parameters), let pending = codes.removeValue(forKey: code),
                pending.expires > now, pending.grant.clientID == clientID
            else { return Self.oauthError("invalid_grant", "The code is unknown, used or expired.") }
            guard value("redirect_uri", parameters) == pending.redirectURI else {
                return Self.oauthError("invalid_grant", "The redirect_uri is not the one the code was issued for.")
            }
            guard let verifier = value("code_verifier", parameters), PKCE.challenge(for: verifier) == pending.challenge
            else { return Self.oauthError("invalid_grant", "The PKCE code_verifier does not match the challenge.") }
            return issue(pending.grant, lifetime: lifetime)
        case "refresh_token":
            let presented = value("refresh_token", parameters) ?? ""
            if let family = saved.usedRefreshTokens[presented] {
                // A refresh token that comes back after it was exchanged: someone else has a copy.
                saved.refusedRefreshGrants += 1
                removeTokens { $0.family == family }
                return Self.oauthError("invalid_grant", "The refresh token was used before; the login is revoked.")
            }
            guard let grant = saved.refreshTokens.removeValue(forKey: presented), grant.clientID == clientID else {
                saved.refusedRefreshGrants += 1
                return Self.oauthError("invalid_grant", "The refresh token is unknown or revoked.")
            }
            saved.usedRefreshTokens[presented] = grant.family
            saved.refreshGrants += 1
            return issue(grant, lifetime: lifetime)
        case RFC8628DeviceDialect.grantType:
            guard let deviceCode = value("device_code", parameters), let device = devices[deviceCode],
                device.clientID == clientID
            else { return Self.oauthError("invalid_grant", "The device code is unknown.") }
            guard device.expires > now else {
                devices[deviceCode] = nil
                return Self.oauthError("expired_token", "The device code expired.")
            }
            switch device.answer {
            case .pending:
                return Self.oauthError("authorization_pending", "The person has not answered yet.")
            case .denied:
                devices[deviceCode] = nil
                return Self.oauthError("access_denied", "The person declined.")
            case .approved(let user):
                devices[deviceCode] = nil
                return issue(
                    Grant(user: user, clientID: clientID, scopes: device.scopes, family: Self.random("f_")),
                    lifetime: lifetime)
            }
        default:
            return Self.oauthError(
                "unsupported_grant_type", "Acme takes authorization_code, refresh_token and device_code.")
        }
    }

    /// A new access token and refresh token for `grant`.
    private mutating func issue(_ grant: Grant, lifetime: TimeInterval) -> HTTPServerResponse {
        let access = Self.random("at_")
        let refresh = Self.random("rt_")
        var timed = grant
        timed.expires = now.addingTimeInterval(lifetime)
        saved.accessTokens[access] = timed
        saved.refreshTokens[refresh] = grant
        var response = HTTPServerResponse.json(
            JSONValue.object([
                "access_token": .string(access), "token_type": .string("Bearer"), "expires_in": .number(lifetime),
                "refresh_token": .string(refresh), "scope": .string(grant.scopes.joined(separator: " ")),
            ]))
        response.headers["Cache-Control"] = "no-store"
        return response
    }

    func me(authorization: String?) -> HTTPServerResponse {
        guard let header = authorization, header.lowercased().hasPrefix("bearer ") else {
            return Self.oauthError("invalid_request", "Send the access token as 'Authorization: Bearer TOKEN'.", 401)
        }
        let token = String(header.dropFirst("bearer ".count)).trimmingCharacters(in: .whitespaces)
        guard let grant = saved.accessTokens[token], (grant.expires ?? .distantFuture) > now,
            let person = Self.user(grant.user)
        else { return Self.oauthError("invalid_token", "The access token is unknown, revoked or expired.", 401) }
        return .json(
            JSONValue.object(["id": .string(person.id), "login": .string(person.login), "name": .string(person.name)]))
    }

    /// Revokes `token`; a refresh token takes its family's access tokens with it (RFC 7009 §2.1).
    mutating func revoke(_ token: String) {
        if let grant = saved.refreshTokens[token] {
            removeTokens { $0.family == grant.family }
        } else if saved.accessTokens.removeValue(forKey: token) != nil {
            removed.insert(token)
        }
    }

    // MARK: Admin

    mutating func admin(_ method: HTTPMethod, _ path: String, json: JSONValue?) -> HTTPServerResponse {
        switch (method, path) {
        case (.post, "device"):
            do {
                try answerDevice(
                    userCode: json?["user_code"]?.stringValue ?? "", user: json?["user"]?.stringValue,
                    approve: json?["deny"]?.boolValue != true)
                return .json(JSONValue.object(["ok": .bool(true)]))
            } catch {
                return .json(JSONValue.object(["error": .string("\(error)")]), status: 404)
            }
        case (.post, "clock"):
            guard let seconds = json?["advance"]?.doubleValue, seconds >= 0 else {
                return .json(JSONValue.object(["error": .string("Send {\"advance\": SECONDS}.")]), status: 400)
            }
            clockOffset += seconds
            return .json(JSONValue.object(["clock_offset": .number(clockOffset)]))
        case (.post, "revoke-all"):
            revokeAll()
            return .json(JSONValue.object(["ok": .bool(true)]))
        case (.get, "stats"):
            return .json(
                JSONValue.object([
                    "access_tokens": .number(Double(saved.accessTokens.count)),
                    "refresh_tokens": .number(Double(saved.refreshTokens.count)),
                    "refresh_grants": .number(Double(saved.refreshGrants)),
                    "refused_refresh_grants": .number(Double(saved.refusedRefreshGrants)),
                ]))
        default:
            return .json(
                JSONValue.object(["error": .string("Unknown admin call \(method) /__acme/\(path).")]), status: 404)
        }
    }
}
