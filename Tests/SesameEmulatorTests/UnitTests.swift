import Foundation
import Sesame
import Testing

@testable import SesameEmulator
@testable import SesameFacebookEmulator

@Suite("Emulator internals")
struct EmulatorUnitTests {
    @Test("HTML escaping covers the five characters that matter")
    func htmlEscape() {
        #expect(
            HTML.escape(#"<a href="x" onclick='y'>&</a>"#)
                == "&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;")
    }

    @Test("trimmedASCII drops leading and trailing spaces, tabs and line breaks only, on strings and slices")
    func trimmedASCII() {
        // Random text of spaces, tabs, line breaks, other whitespace (kept: not ASCII HTTP
        // whitespace), letters and multi-byte characters, against a plain reference.
        let alphabet: [Character] = [" ", "\t", "\n", "\r", "\u{0B}", "\u{A0}", "a", "Z", "=", "é", "😀", "\r\n"]
        var generator = SystemRandomNumberGenerator()
        func reference(_ text: Substring) -> String {
            let space: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
            let bytes = Array(text.utf8)
            guard let first = bytes.firstIndex(where: { !space.contains($0) }),
                let last = bytes.lastIndex(where: { !space.contains($0) })
            else { return "" }
            return String(decoding: bytes[first...last], as: UTF8.self)
        }
        for _ in 0..<2000 {
            let count = Int.random(in: 0...12, using: &generator)
            let text = String((0..<count).map { _ in alphabet.randomElement(using: &generator)! })
            #expect(text.trimmedASCII == reference(text[...]), "\(Array(text.utf8))")
            // A slice from the middle, as a header value is.
            let drop = min(text.count, Int.random(in: 0...2, using: &generator))
            let slice = text.dropFirst(drop)
            #expect(slice.trimmedASCII == reference(slice), "\(Array(slice.utf8))")
        }
        #expect("  \t token \r\n".trimmedASCII == "token")
        #expect(" \u{A0}x\u{A0} ".trimmedASCII == "\u{A0}x\u{A0}")
    }

    @Test("Facebook's redirect parameters use + for spaces")
    func formWriter() {
        #expect(
            FormWriter.encode([("error_description", "Permissions error"), ("s", "a&b=c")])
                == "error_description=Permissions+error&s=a%26b%3Dc")
        #expect(FormWriter.appending([("a", "1")], to: "http://x/cb?z=2#frag") == "http://x/cb?z=2&a=1")
        #expect(FormWriter.appending([("a", "1")], to: "http://x/cb", inFragment: true) == "http://x/cb#a=1")
    }

    @Test(
        "fields lists split at top-level commas and drop modifiers",
        arguments: [
            ("id,name", ["id", "name"]),
            ("id, picture.type(large){url,width},permissions{status}", ["id", "picture", "permissions"]),
            ("", ["id", "name"]),
        ])
    func fields(text: String, expected: [String]) throws {
        #expect(try FieldList.parse(text, defaults: ["id", "name"], limit: 10).names == expected)
    }

    @Test("too many fields or unbalanced braces are refused", arguments: ["a{b", "a}b", "a,b,c,d"])
    func badFields(text: String) {
        #expect(throws: GraphError.self) { try FieldList.parse(text, defaults: [], limit: 3) }
    }

    @Test(
        "version prefixes",
        arguments: [
            ("v19.0", true), ("v2", true), ("v2.12", true), ("me", false), ("v", false), ("v1.2.3", false),
            ("vx.0", false),
        ])
    func versions(segment: String, isVersion: Bool) {
        #expect(FacebookState.isVersion(segment) == isVersion)
    }

    @Test(
        "only loopback Host headers are trusted for absolute URLs",
        arguments: [
            ("127.0.0.1:8080", true), ("localhost:1", true), ("[::1]:9", true), ("localhost", true),
            ("evil.example", false), ("127.0.0.1.evil.example:80", false), ("127.0.0.1:80x", false), ("[::2]:1", false),
        ])
    func loopbackHost(host: String, trusted: Bool) {
        #expect(FacebookState.isLoopbackHost(host) == trusted)
    }

    @Test(
        "redirect URIs: any loopback port, registered ones exactly, nothing else",
        arguments: [
            ("http://127.0.0.1:53682/callback", true), ("http://localhost:1/", true), ("http://[::1]:2/cb", true),
            ("https://app.example/cb", true), ("https://app.example/cb?x=1", true),
            ("https://app.example/other", false),
            ("https://127.0.0.1:5/cb", false), ("http://127.0.0.1:5/cb#frag", false), ("not a url", false),
        ])
    func redirects(uri: String, allowed: Bool) {
        let app = EmulatedApp(
            id: "1", name: "A", secret: "s", clientToken: "c", redirectURIs: ["https://app.example/cb"])
        #expect(app.allowsRedirect(to: uri) == allowed)
    }

    @Test("the usage meter counts a rolling hour")
    func usageMeter() {
        var meter = UsageMeter()
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        for minute in 0..<90 {
            meter.count(appID: "1", at: start.addingTimeInterval(Double(minute) * 60))
            meter.addTime(.milliseconds(10), appID: "1", at: start.addingTimeInterval(Double(minute) * 60))
        }
        let usage = meter.lastHour(appID: "1", at: start.addingTimeInterval(89 * 60))
        #expect(usage.calls == 60)
        #expect(abs(usage.seconds - 0.6) < 0.001)
        #expect(meter.lastHour(appID: "2", at: start).calls == 0)
    }

    @Test("a list of bare field names is split as the full fields parser splits it")
    func fieldNamesAtOnce() throws {
        // Random lists of names, commas, ASCII spaces and line breaks, other text, and the bytes
        // that mark sub-fields and modifiers, against the parser that handles every list.
        let alphabet: [Character] = [
            "a", "Z", "_", "1", ",", ",", " ", "\t", "\r\n", "é", "\u{301}", "{", "}", "(", ")", ".",
        ]
        var generator = SystemRandomNumberGenerator()
        var simple = 0
        for _ in 0..<3000 {
            let count = Int.random(in: 0...14, using: &generator)
            let text = String((0..<count).map { _ in alphabet.randomElement(using: &generator)! })
            let full = Result { try FieldList.parse(text, defaults: [], limit: 4) }
            let names: Result<FieldList?, GraphError> = Result { () throws(GraphError) in
                try FieldList.parseNames(text, limit: 4)
            }
            switch (names, full) {
            case (.success(nil), _):
                #expect(text.utf8.contains { "{}().".utf8.contains($0) }, "\(Array(text.utf8))")
            case (.success(let list?), .success(let expected)):
                simple += 1
                #expect(list.names == expected.names, "\(Array(text.utf8))")
                #expect(list.entries.allSatisfy { $0.subfields == nil && $0.modifiers.isEmpty })
            case (.failure(let error), .failure(let expected as GraphError)):
                #expect(error.message == expected.message, "\(Array(text.utf8))")
            default:
                Issue.record("parseNames and parse differ on \(Array(text.utf8)): \(names), \(full)")
            }
        }
        #expect(simple > 100)
        #expect(try FieldList.parseNames("id,name,email", limit: 10)?.names == ["id", "name", "email"])
        #expect(try FieldList.parseNames("picture{url}", limit: 10) == nil)
    }

    @Test("a path's segments split by bytes are those split by characters")
    func pathSegments() {
        // A `/` followed by a combining mark is one character, and does not split.
        let alphabet: [Character] = ["/", "/", "a", "v", "1", ".", "é", "\u{301}", "😀", "%", " "]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<3000 {
            let count = Int.random(in: 0...12, using: &generator)
            let path = String((0..<count).map { _ in alphabet.randomElement(using: &generator)! })
            let expected = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
            #expect(EmulatorRequest.segments(of: path) == expected, "\(Array(path.utf8))")
        }
        #expect(EmulatorRequest.segments(of: "/v19.0//me/") == ["v19.0", "me"])
        #expect(EmulatorRequest.segments(of: "/a/\u{301}b") == ["a/\u{301}b"])
        let request = EmulatorRequest(method: .get, path: "/v19.0/me/permissions").parsed(maxPathBytes: 8192)
        #expect(request.graphPath().segments == ["me", "permissions"])
        #expect(request.graphPath().versionPrefix == "/v19.0")
        // Too long to be split before the lock: split when asked.
        let long = EmulatorRequest(method: .get, path: "/v2/me").parsed(maxPathBytes: 3)
        #expect(long.graphPath().segments == ["me"])
        #expect(long.graphPath().versionPrefix == "/v2")
    }

    @Test("trace ids are 11 characters of the URL-safe alphabet, and differ from call to call")
    func traceIDs() {
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let ids = (0..<2000).map { _ in FacebookState.makeTraceID() }
        for id in ids {
            #expect(id.count == 11)
            #expect(id.allSatisfy(alphabet.contains))
        }
        #expect(Set(ids).count == ids.count)
    }

    @Test("the usage meter adds time only to a minute it counted, and starts a reused slot afresh")
    func usageMeterSlots() {
        var meter = UsageMeter()
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        // No call counted for the app: the time goes nowhere.
        meter.addTime(.seconds(1), appID: "1", at: start)
        #expect(meter.lastHour(appID: "1", at: start).calls == 0)
        meter.count(appID: "1", at: start)
        meter.count(appID: "1", at: start)
        meter.addTime(.milliseconds(250), appID: "1", at: start)
        // A minute with no call of its own: nothing is added.
        meter.addTime(.seconds(1), appID: "1", at: start.addingTimeInterval(60))
        var usage = meter.lastHour(appID: "1", at: start)
        #expect(usage.calls == 2)
        #expect(abs(usage.seconds - 0.25) < 1e-9)
        // An hour later the same slot holds the new minute alone.
        let later = start.addingTimeInterval(3600)
        meter.count(appID: "1", at: later)
        usage = meter.lastHour(appID: "1", at: later)
        #expect(usage.calls == 1)
        #expect(usage.seconds == 0)
        #expect(meter.lastHour(appID: "2", at: later).calls == 0)
    }

    @Test("the X-App-Usage text is the one string interpolation wrote")
    func usageText() {
        var generator = SystemRandomNumberGenerator()
        var pairs = [(0, 0), (1, 100), (Int.max, Int.min), (Int.min, Int.max), (-7, 12_345)]
        for _ in 0..<500 {
            pairs.append((Int.random(in: -1_000...100_000, using: &generator), Int.random(in: .min ... .max)))
        }
        for (calls, time) in pairs {
            #expect(
                FacebookState.usageText(calls: calls, time: time)
                    == #"{"call_count":\#(calls),"total_cputime":\#(time),"total_time":\#(time)}"#)
        }
    }

    @Test("batch result references pick values by JSONPath")
    func resultReferences() throws {
        let named: [String: JSONValue] = [
            "feed": .object(["data": .array([.object(["id": .string("1_2")]), .object(["id": .string("1_3")])])])
        ]
        #expect(
            try FacebookState.substituteResults(in: "?ids={result=feed:$.data.*.id}", named: named, encode: true)
                == "?ids=1_2,1_3")
        #expect(
            try FacebookState.substituteResults(in: "{result=feed:$.data.1.id}", named: named, encode: false) == "1_3")
        #expect(throws: GraphError.self) {
            try FacebookState.substituteResults(in: "{result=nope:$.id}", named: named, encode: true)
        }
    }

    @Test("a Graph answer leaves the lock as a JSON value, to be encoded after the lock is released")
    func answersAreEncodedOutsideTheLock() async throws {
        let emulator = try Emulator()
        let token = try await emulator.issueToken()
        let request = EmulatorRequest(method: .get, path: "/me", query: [("access_token", token)]).parsed(
            maxPathBytes: 8192)
        let pending = emulator.engine.locked { $0.handle(request) }
        let reply = try #require(pending.reply)
        guard case .json(let value) = reply.body else {
            Issue.record("GET /me was encoded under the lock: \(reply.body)")
            return
        }
        #expect(value["id"] != nil)
    }

    @Test("a Graph answer is finished after the lock: its served version and suppress_http_code")
    func answersAreFinishedOutsideTheLock() async throws {
        let emulator = try Emulator()
        let token = try await emulator.issueToken()
        let request = EmulatorRequest(
            method: .get, path: "/v27.0/nobody", query: [("access_token", token), ("suppress_http_code", "1")]
        ).parsed(maxPathBytes: 8192)
        let pending = emulator.engine.locked { $0.handle(request) }
        // Under the lock: the error as it is, with the version still to be named.
        #expect(pending.graphVersionPrefix == "/v27.0")
        #expect(pending.reply?.status == 400)
        let outcome = await emulator.respond(to: request)
        let response = try #require(outcome.response)
        #expect(response.status == 200)
        #expect(response.headers["facebook-api-version"] == "v27.0")
        // Not Graph: the admin API is answered as it is.
        let admin = await emulator.respond(to: EmulatorRequest(method: .get, path: "/__sesame/scenarios"))
        #expect(admin.response?.headers["facebook-api-version"] == nil)
    }
}
