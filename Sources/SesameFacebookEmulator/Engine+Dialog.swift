import Foundation
import Sesame
import SesameEmulator
import SesameFacebook

/// Why a login dialog could not be shown: either a page (when there is nowhere safe to redirect),
/// or an OAuth error redirect to the app.
enum DialogFailure: Error {
    case page(title: String, message: String)
    case redirect(String)
}

extension FacebookState {
    // MARK: - Pages

    /// The HTML side (the dialog, the device page, the test-user login page), or `nil` for a Graph path.
    func page(_ request: EmulatorRequest, segments: [String], versionPrefix: String) -> Reply? {
        // Every page's path starts with one of these; a Graph call (most requests) returns here.
        switch segments.first {
        case "dialog", "device", "connect", "test-user-login": break
        default: return nil
        }
        let method = request.method
        switch (segments, method) {
        case (["dialog", "oauth"], .get), (["dialog", "oauth"], .head):
            return dialogPage(request, versionPrefix: versionPrefix)
        case (["dialog", "oauth", "confirm"], .post):
            return dialogConfirm(request)
        case (["device"], .get), (["device"], .post):
            return devicePage(request)
        case (["device", "confirm"], .post):
            return deviceConfirm(request)
        case (["connect", "login_success.html"], .get):
            return htmlResponse(
                HTML.page(title: "Success", body: "<h1>Success</h1>\n<p>You can close this window.</p>"))
        case (let path, .get) where path.count == 2 && path[0] == "test-user-login":
            return testUserLogin(userID: path[1])
        default:
            if segments.first == "dialog" {
                return htmlResponse(
                    HTML.errorPage(title: "Not Found", message: "The emulator has no dialog at this address."),
                    status: 404)
            }
            return nil
        }
    }

    /// A page, written after the engine's lock is released; it may not capture the state.
    func htmlResponse(
        _ html: @escaping @autoclosure @Sendable () -> String, status: Int = 200, headers extra: HTTPHeaders = [:]
    ) -> Reply {
        var headers: HTTPHeaders = [
            "Content-Type": "text/html; charset=utf-8",
            "Cache-Control": "no-store",
            "X-Frame-Options": "DENY",
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'",
        ]
        for field in extra { headers.add(name: field.name, value: field.value) }
        return Reply(status: status, headers: headers, body: .page(html))
    }

    func redirectResponse(_ location: String) -> Reply {
        Reply(status: 302, headers: ["Location": location, "Cache-Control": "no-store"], body: .bytes(Data()))
    }

    /// The person the browser is "logged in to Facebook" as: the `sesame_user` cookie that the
    /// test-user login page sets.
    func cookieUser(_ request: EmulatorRequest) -> String? {
        for header in request.headers.values(for: "Cookie") {
            for part in header.split(separator: ";") {
                let pair = part.trimmedASCII.split(separator: "=", maxSplits: 1)
                if pair.count == 2, pair[0] == "sesame_user" { return String(pair[1]) }
            }
        }
        return nil
    }

    func formParameters(_ request: EmulatorRequest) -> Parameters {
        var pairs = request.query
        if let form = request.formPairs() { pairs += form }
        return Parameters(Array(pairs.prefix(limits.maxParameters)))
    }

    // MARK: - The login dialog

    func dialogPage(_ request: EmulatorRequest, versionPrefix: String) -> Reply {
        let dialog: PendingDialog
        do {
            dialog = try openDialog(Parameters(request.query))
        } catch DialogFailure.page(let title, let message) {
            return htmlResponse(HTML.errorPage(title: title, message: message), status: 400)
        } catch DialogFailure.redirect(let location) {
            return redirectResponse(location)
        } catch {
            return htmlResponse(HTML.errorPage(title: "Error", message: "Something went wrong."), status: 500)
        }
        let app = apps[dialog.appID]!
        let people = userOrder.compactMap { users[$0] }.filter {
            $0.testUserAppID == nil || $0.testUserAppID == dialog.appID
        }
        let person = dialogUser(cookieUser(request), appID: dialog.appID)
        let asking = person.map { permissionsToAsk(dialog, userID: $0.id) } ?? dialog.requested
        let granted = person.map { effectivePermissions(appID: dialog.appID, userID: $0.id).granted } ?? []
        let audience = dialog.audience ?? .allFriends
        return htmlResponse(
            HTML.consentForm(
                action: "\(versionPrefix)/dialog/oauth/confirm", hidden: [("request_id", dialog.id)], appName: app.name,
                asking: asking, alreadyGranted: granted, people: people, selected: person?.id, audience: audience))
    }

    func dialogConfirm(_ request: EmulatorRequest) -> Reply {
        let form = formParameters(request)
        guard let id = form["request_id"], let dialog = dialogs[id] else {
            return htmlResponse(
                HTML.errorPage(
                    title: "This login has expired",
                    message: "The login request is no longer waiting. Go back to the app and start again."),
                status: 400)
        }
        do {
            let location = try completeDialog(
                dialog, userID: form["user"], grant: form.all("permission"), decline: nil,
                cancel: form["action"] == "cancel")
            return redirectResponse(location)
        } catch let error as GraphError {
            return htmlResponse(HTML.errorPage(title: "Cannot log in", message: error.message), status: 400)
        } catch {
            return htmlResponse(HTML.errorPage(title: "Error", message: "Something went wrong."), status: 500)
        }
    }

    /// Checks a dialog request as Facebook does and records it as pending.
    func openDialog(_ parameters: Parameters) throws -> PendingDialog {
        guard let clientID = parameters.nonEmpty("client_id") else {
            throw DialogFailure.page(title: "Invalid App ID", message: "The parameter client_id is required.")
        }
        guard let app = apps[clientID] else {
            throw DialogFailure.page(
                title: "Invalid App ID", message: "The provided app ID does not look like a valid app ID.")
        }
        guard let redirectURI = parameters.nonEmpty("redirect_uri") else {
            throw DialogFailure.page(title: "URL Blocked", message: "The parameter redirect_uri is required.")
        }
        guard redirectURI.utf8.count <= 2048, app.allowsRedirect(to: redirectURI) else {
            throw DialogFailure.page(
                title: "URL Blocked",
                message: "This redirect failed because the redirect URI is not whitelisted in the app's Client OAuth "
                    + "Settings. Make sure Client and Web OAuth Login are on and add all your app domains as Valid "
                    + "OAuth Redirect URIs.")
        }
        let state = parameters["state"]
        func refuse(_ error: String, _ description: String) -> DialogFailure {
            var items = [("error", error), ("error_description", description)]
            if let state { items.append(("state", state)) }
            return .redirect(FormWriter.appending(items, to: redirectURI))
        }
        if let state, state.utf8.count > 4096 { throw refuse("invalid_request", "The state parameter is too long.") }
        var responseTypes = Set(splitList(parameters["response_type"]))
        if responseTypes.isEmpty { responseTypes = ["code"] }
        guard responseTypes.isSubset(of: ["code", "token", "granted_scopes"]),
            responseTypes.contains("code") || responseTypes.contains("token")
        else {
            throw refuse("unsupported_response_type", "response_type must be code or token, with granted_scopes.")
        }
        let requested: [String]
        let configurationID = parameters.nonEmpty("config_id")
        do {
            // A Login for Business configuration replaces the scope list.
            let names = try loginConfiguration(configurationID)?.permissions ?? splitList(parameters["scope"])
            requested = try PermissionCatalogue.checked(names)
        } catch let error as GraphError {
            throw DialogFailure.page(
                title: "Invalid Scopes",
                message: error.message.replacingOccurrences(of: "(#100) ", with: "")
                    + ". This message is only shown to developers.")
        }
        let challenge = parameters.nonEmpty("code_challenge")
        var method = parameters.nonEmpty("code_challenge_method")
        if let challenge {
            method = method ?? "plain"
            guard method == "S256" || method == "plain" else {
                throw refuse("invalid_request", "code_challenge_method must be S256 or plain.")
            }
            let allowed = CharacterSet(
                charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
            let valid =
                method == "S256"
                ? challenge.count == 43 && Base64URL.decode(challenge)?.count == 32
                : (43...128).contains(challenge.count) && challenge.unicodeScalars.allSatisfy(allowed.contains)
            guard valid else { throw refuse("invalid_request", "code_challenge is not a valid \(method!) challenge.") }
        } else if method != nil {
            throw refuse("invalid_request", "code_challenge_method was given without code_challenge.")
        }
        let dialog = PendingDialog(
            id: try Crypto.randomURLSafeString(byteCount: 18), appID: app.id, redirectURI: redirectURI, state: state,
            requested: requested, asking: requested, wantsCode: responseTypes.contains("code"),
            wantsToken: responseTypes.contains("token"),
            returnScopes: responseTypes.contains("granted_scopes") || parameters.bool("return_scopes", default: false),
            challenge: challenge, challengeMethod: challenge == nil ? nil : method,
            audience: parameters["default_audience"].flatMap(Audience.init(dialogValue:)),
            authType: parameters.nonEmpty("auth_type"), createdAt: now, configurationID: configurationID)
        dialogs[dialog.id] = dialog
        evictOld(&dialogs, createdAt: \.createdAt)
        return dialog
    }

    /// What the dialog asks `userID` about: what is not granted yet, leaving out what the person
    /// declined before unless `auth_type=rerequest`.
    func permissionsToAsk(_ dialog: PendingDialog, userID: String) -> [String] {
        let (granted, declined) = effectivePermissions(appID: dialog.appID, userID: userID)
        let rerequest = dialog.authType == "rerequest"
        return dialog.requested.filter { name in
            if name == "public_profile" { return !granted.contains(name) }
            return !granted.contains(name) && (rerequest || !declined.contains(name))
        }
    }

    /// Answers a pending dialog for a person and returns where the browser goes next.
    ///
    /// `grant` lists the permissions approved (the checked boxes); when it is `nil`, everything asked
    /// for is approved except `decline`.
    func completeDialog(
        _ dialog: PendingDialog, userID: String?, grant: [String]?, decline: [String]?, cancel: Bool
    )
        throws -> String
    {
        var items: [(String, String)] = []
        if cancel {
            dialogs[dialog.id] = nil
            items = [
                ("error", "access_denied"), ("error_code", "200"), ("error_description", "Permissions error"),
                ("error_reason", "user_denied"),
            ]
            if let state = dialog.state { items.append(("state", state)) }
            return FormWriter.appending(items, to: dialog.redirectURI)
        }
        guard let person = dialogUser(userID, appID: dialog.appID), userID == nil || person.id == userID else {
            throw GraphError.admin("There is no person with the id '\(userID ?? "")' who can log in to this app.")
        }
        dialogs[dialog.id] = nil
        let asked = permissionsToAsk(dialog, userID: person.id)
        let approved: [String]
        if let grant {
            approved = asked.filter { grant.contains($0) || $0 == "public_profile" }
        } else {
            approved = asked.filter { !(decline ?? []).contains($0) || $0 == "public_profile" }
        }
        let declined = asked.filter { !approved.contains($0) }
        recordLogin(
            appID: dialog.appID, userID: person.id, granted: approved, declined: declined, audience: dialog.audience)
        recordTargets(appID: dialog.appID, userID: person.id, configurationID: dialog.configurationID)
        let (allGranted, allDeclined) = effectivePermissions(appID: dialog.appID, userID: person.id)
        var fragment: [(String, String)] = []
        if dialog.wantsCode {
            let code = try Crypto.randomURLSafeString(byteCount: 32)
            codes[code] = CodeRecord(
                code: code, appID: dialog.appID, userID: person.id, redirectURI: dialog.redirectURI,
                challenge: dialog.challenge, challengeMethod: dialog.challengeMethod, createdAt: now)
            evictOld(&codes, createdAt: \.createdAt)
            items.append(("code", code))
        }
        if dialog.wantsToken {
            let token = try issueUserToken(appID: dialog.appID, userID: person.id, longLived: false)
            fragment.append(("access_token", token.token))
            fragment.append(("expires_in", String(Int(configuration.shortLivedTokenLifetime))))
            let dataAccess = self.grant(appID: dialog.appID, userID: person.id)?.dataAccessExpiresAt ?? now
            fragment.append(("data_access_expiration_time", String(Int(dataAccess.timeIntervalSince1970))))
        }
        var scopes: [(String, String)] = []
        if dialog.returnScopes {
            scopes.append(("granted_scopes", allGranted.joined(separator: ",")))
            scopes.append(("denied_scopes", allDeclined.joined(separator: ",")))
        }
        let state = dialog.state.map { [("state", $0)] } ?? []
        if dialog.wantsToken {
            let base = items.isEmpty ? dialog.redirectURI : FormWriter.appending(items, to: dialog.redirectURI)
            return FormWriter.appending(fragment + scopes + state, to: base, inFragment: true)
        }
        return FormWriter.appending(items + scopes + state, to: dialog.redirectURI)
    }

    /// Keeps at most `limits.maxPending` entries, dropping the oldest.
    func evictOld<Value>(_ table: inout [String: Value], createdAt: KeyPath<Value, Date>) {
        guard table.count > limits.maxPending else { return }
        let excess = table.count - limits.maxPending
        for (key, _) in table.sorted(by: { $0.value[keyPath: createdAt] < $1.value[keyPath: createdAt] }).prefix(excess)
        {
            table[key] = nil
        }
    }

    // MARK: - The test-user login page

    func testUserLogin(userID: String) -> Reply {
        guard let user = users[userID], user.isTestUser else {
            return htmlResponse(
                HTML.errorPage(title: "Not Found", message: "There is no test user with that id."), status: 404)
        }
        let (name, id) = (user.name, user.id)
        return htmlResponse(
            HTML.page(
                title: "Test user login",
                body: """
                    <h1>You are now logged in as \(HTML.escape(name))</h1>
                    <p>This browser acts as the test user \(HTML.escape(name)) (<code>\(HTML.escape(id))</code>) \
                    in the emulator's login dialog.</p>
                    """),
            headers: ["Set-Cookie": "sesame_user=\(id); Path=/; HttpOnly; SameSite=Lax"])
    }
}
