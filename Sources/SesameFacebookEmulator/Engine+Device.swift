import Foundation
import Sesame
import SesameEmulator
import SesameFacebook

extension FacebookState {
    // MARK: - Graph: device/login and device/login_status

    /// The app a device call is for: its `access_token` must be `{app-id}|{client-token}` (or an app token).
    func deviceApp(_ context: GraphContext) throws -> EmulatedApp {
        let caller = try requireCaller(context, forMe: false)
        guard caller.kind == .client || caller.kind == .app, let app = apps[caller.appID] else {
            throw GraphError.invalidParameter(
                "Device login needs access_token={app-id}|{client-token}, the app's client token.")
        }
        return app
    }

    /// `POST /device/login`: a new device code.
    func deviceLogin(_ context: GraphContext) throws -> GraphAnswer {
        let app = try deviceApp(context)
        // A Login for Business configuration replaces the scope list.
        let configurationID = context.parameters.nonEmpty("config_id")
        let scopes = try PermissionCatalogue.checked(
            try loginConfiguration(configurationID)?.permissions ?? splitList(context.parameters["scope"]))
        let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
        var userCode = ""
        repeat {
            userCode = String(try Crypto.randomBytes(count: 8).map { alphabet[Int($0) % alphabet.count] })
        } while userCodes[userCode] != nil
        let record = DeviceRecord(
            code: try Crypto.randomBytes(count: 16).map { String($0, radix: 16).leftPadded(2) }.joined(),
            userCode: userCode, appID: app.id, scopes: scopes, createdAt: now,
            expiresAt: now.addingTimeInterval(configuration.deviceCodeLifetime), configurationID: configurationID)
        devices[record.code] = record
        userCodes[userCode] = record.code
        if devices.count > limits.maxPending {
            evictOld(&devices, createdAt: \.createdAt)
            userCodes = userCodes.filter { devices[$0.value] != nil }
        }
        return GraphAnswer(
            body: .object([
                "code": .string(record.code), "user_code": .string(userCode),
                "verification_uri": .string("\(origin(for: context.request))/device"),
                "expires_in": .int(Int(configuration.deviceCodeLifetime)),
                "interval": .int(configuration.devicePollInterval),
            ]))
    }

    /// `POST /device/login_status`: pending, slow down, expired, declined, or the token.
    func deviceLoginStatus(_ context: GraphContext) throws -> GraphAnswer {
        let app = try deviceApp(context)
        guard let code = context.parameters.nonEmpty("code") else {
            throw GraphError.invalidParameter("The parameter code is required")
        }
        guard var record = devices[code], record.appID == app.id else { throw GraphError.deviceExpired }
        let now = self.now
        let previousPoll = record.lastPollAt
        record.lastPollAt = now
        defer { devices[code] = record }
        if case .consumed = record.status { throw GraphError.deviceExpired }
        guard now < record.expiresAt else { throw GraphError.deviceExpired }
        switch record.status {
        case .approved(let userID):
            record.status = .consumed
            let token = try issueUserToken(appID: app.id, userID: userID, longLived: true)
            let dataAccess = grant(appID: app.id, userID: userID)?.dataAccessExpiresAt ?? now
            return GraphAnswer(
                body: .object([
                    "access_token": .string(token.token),
                    "expires_in": .int(Int(configuration.longLivedTokenLifetime)),
                    "data_access_expiration_time": .int(Int(dataAccess.timeIntervalSince1970)),
                ]))
        case .declined:
            throw GraphError.deviceDeclined
        default:
            if let previousPoll, now.timeIntervalSince(previousPoll) < Double(configuration.devicePollInterval) {
                throw GraphError.deviceSlowDown
            }
            throw GraphError.devicePending
        }
    }

    // MARK: - Approving a device code

    /// The pending device login with `userCode` (any case, spaces and dashes ignored).
    func pendingDevice(userCode: String) throws -> DeviceRecord {
        let normalized = userCode.uppercased().filter { $0.isLetter || $0.isNumber }
        guard let code = userCodes[normalized], let record = devices[code] else {
            throw GraphError.admin("No device login is waiting for the code '\(userCode)'.", status: 404)
        }
        guard case .pending = record.status, now < record.expiresAt else {
            throw GraphError.admin("The device code '\(userCode)' has expired or was already answered.", status: 409)
        }
        return record
    }

    /// Approves or declines a device login for a person; returns what was granted and declined.
    @discardableResult
    func answerDevice(
        userCode: String, userID: String?, grant: [String]?, decline: [String]?, approve: Bool
    ) throws
        -> (granted: [String], declined: [String])
    {
        var record = try pendingDevice(userCode: userCode)
        guard approve else {
            record.status = .declined
            devices[record.code] = record
            return ([], record.scopes)
        }
        guard let person = dialogUser(userID, appID: record.appID), userID == nil || person.id == userID else {
            throw GraphError.admin("There is no person with the id '\(userID ?? "")' who can log in to this app.")
        }
        let (alreadyGranted, _) = effectivePermissions(appID: record.appID, userID: person.id)
        let asked = record.scopes.filter { !alreadyGranted.contains($0) }
        let approved =
            grant.map { list in asked.filter { list.contains($0) || $0 == "public_profile" } }
            ?? asked.filter { !(decline ?? []).contains($0) || $0 == "public_profile" }
        let declined = asked.filter { !approved.contains($0) }
        recordLogin(appID: record.appID, userID: person.id, granted: approved, declined: declined, audience: nil)
        recordTargets(appID: record.appID, userID: person.id, configurationID: record.configurationID)
        record.status = .approved(userID: person.id)
        devices[record.code] = record
        return (approved, declined)
    }

    // MARK: - The device page

    /// `GET|POST /device`: enter the code; a valid code shows the consent form.
    func devicePage(_ request: EmulatorRequest) -> Reply {
        let form = formParameters(request)
        let entered = form.nonEmpty("user_code")
        var problem: String?
        if let entered {
            do {
                let record = try pendingDevice(userCode: entered)
                let app = apps[record.appID]!
                let people = userOrder.compactMap { users[$0] }.filter {
                    $0.testUserAppID == nil || $0.testUserAppID == record.appID
                }
                let person = dialogUser(cookieUser(request), appID: record.appID)
                let granted = person.map { effectivePermissions(appID: record.appID, userID: $0.id).granted } ?? []
                return htmlResponse(
                    HTML.consentForm(
                        action: "/device/confirm", hidden: [("user_code", record.userCode)], appName: app.name,
                        asking: record.scopes, alreadyGranted: granted, people: people, selected: person?.id,
                        audience: nil))
            } catch let error as GraphError {
                problem = error.message
            } catch {
                problem = "Something went wrong."
            }
        }
        let shown = problem
        return htmlResponse(Self.codeEntryPage(problem: shown, entered: entered), status: shown == nil ? 200 : 400)
    }

    /// The page that asks for the code a device shows, saying what was wrong with the last one.
    static func codeEntryPage(problem: String?, entered: String?) -> String {
        var body = "<h1>Connect a device</h1>\n"
        if let problem { body += "<p class=\"error\">\(HTML.escape(problem))</p>\n" }
        body += """
            <form method="post" action="/device">
            <p><label for="user_code">Enter the code shown on your device:</label></p>
            <p><input id="user_code" name="user_code" autocomplete="off" maxlength="16" \
            value="\(HTML.escape(entered ?? ""))"></p>
            <div class="buttons"><button class="primary" type="submit">Continue</button></div>
            </form>
            """
        return HTML.page(title: "Connect a device", body: body)
    }

    /// `POST /device/confirm`: the consent form's answer.
    func deviceConfirm(_ request: EmulatorRequest) -> Reply {
        let form = formParameters(request)
        let approve = form["action"] != "cancel"
        do {
            try answerDevice(
                userCode: form["user_code"] ?? "", userID: form["user"], grant: approve ? form.all("permission") : nil,
                decline: nil, approve: approve)
        } catch let error as GraphError {
            return htmlResponse(HTML.errorPage(title: "Cannot connect the device", message: error.message), status: 400)
        } catch {
            return htmlResponse(HTML.errorPage(title: "Error", message: "Something went wrong."), status: 500)
        }
        let message =
            approve
            ? "<h1>Success!</h1>\n<p>Return to your device: it is now connected.</p>"
            : "<h1>Cancelled</h1>\n<p>The device was not connected.</p>"
        return htmlResponse(HTML.page(title: approve ? "Success" : "Cancelled", body: message))
    }
}
