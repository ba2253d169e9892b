import Foundation
import Sesame
import SesameEmulator

extension OIDCEngine {
    // MARK: Token endpoint

    func token(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        if let failure = scenarioFailure(at: .serverError, &state) { return failure }
        if consume(.tooManyRequests, &state) != nil {
            var response = Reply.oauthError("temporarily_unavailable", "Too many requests.", status: 429)
            response.headers["Retry-After"] = "7"
            response.body = .json(.object(["message": .string("rate limited")]))
            return response
        }
        let clientID: String
        switch authenticateClient(request, &state) {
        case .client(let id): clientID = id
        case .refused(let response): return response
        }
        switch request["grant_type"] {
        case "authorization_code": return codeGrant(request, clientID: clientID, &state)
        case "refresh_token": return refreshGrant(request, clientID: clientID, &state)
        case "client_credentials": return clientCredentialsGrant(request, clientID: clientID, &state)
        case MachineGrant.tokenExchangeGrantType: return tokenExchangeGrant(request, clientID: clientID, &state)
        case "urn:ietf:params:oauth:grant-type:device_code" where state.deviceLoginEnabled:
            return deviceGrant(request, clientID: clientID, &state)
        default: return Reply.oauthError("unsupported_grant_type", "Unsupported grant_type.")
        }
    }

    func newGrant(clientID: String, sub: String, scope: String, authTime: Date) -> Grant {
        Grant(
            id: (try? Crypto.randomURLSafeString(byteCount: 12)) ?? UUID().uuidString, clientID: clientID, sub: sub,
            scope: scope, authTime: authTime)
    }

    func codeGrant(_ request: LoopbackRequest, clientID: String, _ state: inout State) -> Reply {
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

    /// The refresh token grant, with rotation: each refresh token works once, and one that was
    /// rotated away and comes back revokes its whole family (RFC 9700 §4.14.2).
    func refreshGrant(_ request: LoopbackRequest, clientID: String, _ state: inout State) -> Reply {
        let reply = rotate(request, clientID: clientID, &state)
        state.families.count(refreshGranted: reply.status == 200)
        return reply
    }

    private func rotate(_ request: LoopbackRequest, clientID: String, _ state: inout State) -> Reply {
        let token = request["refresh_token"] ?? ""
        // A used token revokes its family whichever client presents it: the server cannot tell
        // the thief from the owner (RFC 9700 §4.14.2).
        if let family = state.families.family(ofUsed: token) {
            revokeFamily(family, &state)
            return Reply.oauthError(
                "invalid_grant", "The refresh token was already used; every token of its grant is revoked.")
        }
        guard let record = state.refreshTokens[token], record.grant.clientID == clientID else {
            return Reply.oauthError("invalid_grant", "The refresh token is invalid or was revoked.")
        }
        let grant = record.grant
        guard record.expiresAt > now(state) else {
            state.refreshTokens[token] = nil
            state.families.forget(grant.id)
            return Reply.oauthError("invalid_grant", "The refresh token expired.")
        }
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
            state.families.forget(grant.id)
            return Reply.oauthError("invalid_grant", "The refresh token was revoked.")
        }
        state.refreshTokens[token] = nil  // Rotation: each refresh token works once.
        state.families.retire(token, family: grant.id)
        return issue(narrowed, refreshGrant: grant, nonce: nil, &state)
    }

    /// Revokes every access and refresh token of the grant `family`, as a provider that saw one of
    /// its used refresh tokens come back does.
    func revokeFamily(_ family: String, _ state: inout State) {
        state.refreshTokens = state.refreshTokens.filter { $0.value.grant.id != family }
        state.accessTokens = state.accessTokens.filter { $0.value.grant.id != family }
        state.families.revoke(family)
    }

    func deviceGrant(_ request: LoopbackRequest, clientID: String, _ state: inout State) -> Reply {
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
        let withIDToken = consume(.deviceNoIDToken, &state) == nil
        return issue(grant, nonce: nil, withIDToken: withIDToken, &state)
    }

    func deviceAuthorization(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        let clientID: String
        switch authenticateClient(request, &state) {
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
    func issue(
        _ grant: Grant, refreshGrant: Grant? = nil, nonce: String?, withIDToken: Bool = true, _ state: inout State
    )
        -> Reply
    {
        let access = "at-" + ((try? Crypto.randomURLSafeString(byteCount: 32)) ?? UUID().uuidString)
        let refresh = "rt-" + ((try? Crypto.randomURLSafeString(byteCount: 32)) ?? UUID().uuidString)
        state.accessTokens[access] = (grant, now(state).addingTimeInterval(accessTokenLifetime))
        state.refreshTokens[refresh] = (refreshGrant ?? grant, now(state).addingTimeInterval(refreshTokenLifetime))
        let body: [String: JSONValue] = [
            "access_token": .string(access), "token_type": .string("Bearer"),
            "expires_in": .number(accessTokenLifetime), "refresh_token": .string(refresh),
            "refresh_token_expires_in": .number(refreshTokenLifetime), "scope": .string(grant.scope),
        ]
        var reply = Reply.json(.object(body))
        if withIDToken, grant.scope.split(separator: " ").contains("openid") {
            reply.deferredField = idToken(for: grant, nonce: nonce, accessToken: access, &state)
        }
        return reply
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

    /// The `id_token` of a token answer for `grant`: its claims and signing key are settled now,
    /// under the lock, and it is signed when the answer is encoded, after the lock is released
    /// (signing, RSA above all, is the costliest step of a token answer).
    func idToken(for grant: Grant, nonce: String?, accessToken: String, _ state: inout State) -> DeferredField {
        let person = state.people.first { $0.sub == grant.sub } ?? state.people[0]
        let skew = TimeInterval(state.scenarios.first { $0.setting.scenario == .clockSkew }?.setting.seconds ?? 0)
        let issuedAt = now(state).addingTimeInterval(skew)
        var expiresAt = issuedAt.addingTimeInterval(idTokenLifetime)
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
        quirkClaims(&claims, of: person, &state)
        // The unknown-key scenario's key was made when it was activated; a key the emulator
        // publishes under a kid it never published would do, if that key were missing.
        let unknownKey = consume(.unknownKey, &state) != nil
        let algorithm = algorithm
        let kid = unknownKey ? "key-not-published" : state.keys[0].kid
        let key = unknownKey ? state.unpublishedKey ?? state.keys[0].key : state.keys[0].key
        let breaksSignature = consume(.badSignature, &state) != nil
        let payload = JSONValue.object(claims)
        return DeferredField(
            name: "id_token",
            value: {
                // The compact JWS: header, claims and signature; `breaksSignature` flips a bit of
                // the signature (the `badSignature` scenario).
                let header: JSONValue = .object([
                    "alg": .string(algorithm.rawValue), "kid": .string(kid), "typ": .string("JWT"),
                ])
                let input = Base64URL.encode(header.jsonData) + "." + Base64URL.encode(payload.jsonData)
                var signature = try key.sign(Data(input.utf8))
                if breaksSignature { signature[signature.startIndex] ^= 0x01 }
                return input + "." + Base64URL.encode(signature)
            },
            failure: { .oauthError("server_error", "The ID token could not be signed.", status: 500) })
    }

    // MARK: Userinfo and revocation

    func userinfo(_ request: LoopbackRequest, _ state: State) -> Reply {
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

    func revoke(_ request: LoopbackRequest, _ state: inout State) -> Reply {
        let clientID: String
        switch authenticateClient(request, &state) {
        case .client(let id): clientID = id
        case .refused(let response): return response
        }
        guard let token = request["token"] else { return Reply.oauthError("invalid_request", "token is required.") }
        // RFC 7009 §2.1: revoking a refresh token revokes the access tokens of the same grant;
        // a token of another client is left alone (and still answered with 200).
        if let grant = state.refreshTokens[token]?.grant, grant.clientID == clientID {
            state.refreshTokens[token] = nil
            state.families.forget(grant.id)
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
}
