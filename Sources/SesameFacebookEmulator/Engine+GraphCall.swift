import Foundation
import Sesame
import SesameEmulator
import Synchronization

extension FacebookState {
    // MARK: - Graph requests

    /// Everything a Graph handler needs to know about its request.
    struct GraphContext {
        var request: EmulatorRequest
        var method: HTTPMethod
        var segments: [String]
        var parameters: Parameters
        /// The caller the token names; `nil` when no token was sent.
        var caller: Caller?
        /// Why the token was refused, when it was.
        var tokenError: GraphError?
        var versionPrefix: String
        var isBatchItem: Bool
    }

    /// Who is calling, from the access token.
    struct Caller {
        enum Kind { case user, app, client }
        var kind: Kind
        var appID: String
        var userID: String?
        var token: String
    }

    /// A successful Graph answer.
    struct GraphAnswer {
        var status = 200
        var body: JSONValue
        var headers: HTTPHeaders = [:]
        /// A body that is not JSON (a profile picture); replaces ``body`` when set.
        var rawBody: Data?
        /// A batch's answers; replaces ``body`` when set.
        var batch: [Reply.BatchItem?]?

        /// What to send: the raw body, the batch's answers, or the JSON value (each encoded after
        /// the lock is released).
        var replyBody: Reply.Body {
            if let rawBody { return .bytes(rawBody) }
            if let batch { return .batch(batch) }
            return .json(body)
        }
    }

    func graph(_ request: EmulatorRequest, segments: [String], versionPrefix: String) -> PendingOutcome {
        var context: GraphContext
        do {
            context = try graphContext(request, segments: segments, versionPrefix: versionPrefix, isBatchItem: false)
        } catch {
            return .respond(graphErrorResponse(error as? GraphError ?? .unknown, appID: defaultApp.id))
        }
        let appID = appID(for: context)
        let now = self.now
        usage.withLock { $0.count(appID: appID, at: now) }

        let effects = scenarioEffects(for: context)
        var outcome: PendingOutcome
        if effects.dropConnection {
            outcome = PendingOutcome(reply: nil, delay: effects.delay)
        } else if let error = effects.error ?? rateLimitError(appID: appID) {
            outcome = PendingOutcome(reply: graphErrorResponse(error, appID: appID), delay: effects.delay)
        } else {
            outcome = PendingOutcome(reply: answer(context, appID: appID), delay: effects.delay)
        }
        outcome.usageAppID = appID
        return outcome
    }

    /// Runs the handler for `context` and turns its answer or error into a response.
    func answer(_ context: GraphContext, appID: String) -> Reply {
        do {
            var context = context
            let answer = try route(&context)
            var headers = graphHeaders(appID: appID)
            for field in answer.headers { headers[field.name] = field.value }  // Rare: pictures only.
            return Reply(status: answer.status, headers: headers, body: answer.replyBody)
        } catch let error as GraphError {
            return graphErrorResponse(error, appID: appID)
        } catch {
            return graphErrorResponse(.unknown, appID: appID)
        }
    }

    func graphContext(
        _ request: EmulatorRequest, segments: [String], versionPrefix: String, isBatchItem: Bool
    )
        throws -> GraphContext
    {
        let parameters = try request.parameters()
        guard parameters.pairs.count <= limits.maxParameters else {
            throw GraphError.invalidParameter("Too many parameters (the emulator accepts \(limits.maxParameters)).")
        }
        if !allowsLegacyForms, let form = Self.legacyForm(parameters, segments: segments) {
            throw GraphError.legacyForm(form)
        }
        var method = request.method == .head ? HTTPMethod.get : request.method
        if let override = parameters["method"], method == .get || method == .post {
            method = HTTPMethod(rawValue: override)
        }
        guard method == .get || method == .post || method == .delete else {
            throw GraphError.unsupportedMethod(method)
        }
        var context = GraphContext(
            request: request, method: method, segments: segments, parameters: parameters, caller: nil,
            tokenError: nil, versionPrefix: versionPrefix, isBatchItem: isBatchItem)
        if let token = request.accessToken(parameters: parameters) {
            do { context.caller = try resolve(token: token, consumeScenarios: true) } catch let error as GraphError {
                context.tokenError = error
            }
        }
        return context
    }

    /// Whether the `legacy-forms` scenario is active: the app is one created before 2026-11-04,
    /// which may still send Graph's legacy request forms.
    var allowsLegacyForms: Bool { scenarios.contains { $0.setting.scenario == .legacyForms } }

    /// The legacy request form a call uses, named, or `nil`. Graph API v27.0's changelog: "new
    /// apps cannot use multi-ID requests, date/time formatting, HTTP method override, field
    /// aliases, JSONP callbacks, or asynchronous batch requests", on every version.
    static func legacyForm(_ parameters: Parameters, segments: [String]) -> String? {
        if parameters["method"] != nil { return "HTTP method override (the method parameter)" }
        if parameters["ids"] != nil { return "A multi-ID request (the ids parameter)" }
        if parameters["date_format"] != nil { return "Date formatting (the date_format parameter)" }
        if parameters["callback"] != nil { return "A JSONP callback (the callback parameter)" }
        if let fields = parameters["fields"], fields.contains(".as(") { return "A field alias (.as() in fields)" }
        // The Marketing API's `POST /act_{id}/async_batch_requests`.
        if segments.last == "async_batch_requests" { return "An asynchronous batch request" }
        return nil
    }

    /// The token from `access_token`, or from an `Authorization: Bearer|OAuth` header.
    static func accessToken(in request: EmulatorRequest, parameters: Parameters) -> String? {
        if let token = parameters.nonEmpty("access_token") { return token }
        guard let header = request.headers["Authorization"], let space = header.utf8.firstIndex(of: UInt8(ascii: " "))
        else { return nil }
        let scheme = header.utf8[..<space]
        guard
            scheme.elementsEqual("bearer".utf8, by: asciiCaseInsensitive)
                || scheme.elementsEqual("oauth".utf8, by: asciiCaseInsensitive)
        else { return nil }
        let token = header[header.utf8.index(after: space)...].trimmedASCII
        return token.isEmpty ? nil : token
    }

    func appID(for context: GraphContext) -> String {
        if let caller = context.caller { return caller.appID }
        if let clientID = context.parameters["client_id"], apps[clientID] != nil { return clientID }
        return defaultApp.id
    }

    /// The headers on every Graph answer.
    func graphHeaders(appID: String, traceID: String? = nil) -> HTTPHeaders {
        // Fields made directly: a dictionary literal goes through an array of pairs first.
        HTTPHeaders([
            HTTPHeaders.Field(name: "Content-Type", value: "application/json; charset=UTF-8"),
            HTTPHeaders.Field(name: "facebook-api-version", value: configuration.graphVersion),
            HTTPHeaders.Field(name: "x-fb-trace-id", value: traceID ?? Self.makeTraceID()),
            HTTPHeaders.Field(name: "X-App-Usage", value: appUsageHeader(appID: appID)),
            HTTPHeaders.Field(name: "Cache-Control", value: "private, no-cache, no-store, must-revalidate"),
            HTTPHeaders.Field(name: "Access-Control-Allow-Origin", value: "*"),
        ])
    }

    /// A Graph error as Facebook sends it: the envelope, its status, `WWW-Authenticate` for token
    /// errors, and any headers of the error itself (usage headers for throttling).
    func graphErrorResponse(_ error: GraphError, appID: String) -> Reply {
        let traceID = Self.makeTraceID()
        var headers = graphHeaders(appID: appID, traceID: traceID)
        if error.challengesToken {
            headers["WWW-Authenticate"] =
                "OAuth \"Facebook Platform\" \"invalid_token\" \"\(error.message.replacingOccurrences(of: "\"", with: "'"))\""
        }
        for field in error.headers { headers[field.name] = field.value }
        return Reply(status: error.status, headers: headers, body: .json(error.envelope(traceID: traceID)))
    }

    /// An 11-character support id like Facebook's `fbtrace_id`. Not a secret: a SplitMix64
    /// sequence seeded from the system generator is enough, and costs no system call.
    ///
    /// The sequence's state is an atomic, advanced by one `wrappingAdd`: the server's threads
    /// answering side by side took a lock for it on every answer.
    static func makeTraceID() -> String {
        let increment: UInt64 = 0x9E37_79B9_7F4A_7C15
        var z = traceSequence.wrappingAdd(increment, ordering: .relaxed).newValue
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        var bits = z ^ (z >> 31)
        // Eleven ASCII bytes: written straight into the string's storage.
        return String(unsafeUninitializedCapacity: 11) { buffer in
            for index in 0..<11 {
                buffer[index] = traceAlphabet[Int(bits & 63)]
                bits >>= 6
            }
            return 11
        }
    }

    private static let traceSequence = Atomic<UInt64>(UInt64.random(in: .min ... .max))
    private static let traceAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
}

/// Whether two ASCII bytes are the same letter in any case, or the same byte.
private func asciiCaseInsensitive(_ a: UInt8, _ b: UInt8) -> Bool {
    a == b || (a | 0x20 == b | 0x20 && (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(a | 0x20))
}
