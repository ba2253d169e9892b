import Foundation
import Sesame
import Testing

@testable import SesameFacebookEmulator

private func record(_ serial: Int, expiresAt: Date?) -> TokenRecord {
    TokenRecord(
        token: "t\(serial)", kind: .user, appID: "1", userID: "u", serial: serial,
        issuedAt: Date(timeIntervalSince1970: 0),
        expiresAt: expiresAt, isLongLived: false)
}

@Suite("Emulator under hostile input")
struct EmulatorHostileInputTests {
    @Test("the token table drops expired tokens first, then the oldest, keeping the newest")
    func evictionOrder() {
        var table = TokenTable()
        let now = Date(timeIntervalSince1970: 1_000)
        for serial in 1...10 {
            // Serials 3 and 7 have expired; the rest live on.
            let expired = serial == 3 || serial == 7
            table["t\(serial)"] = record(serial, expiresAt: expired ? now.addingTimeInterval(-1) : now + 3_600)
        }
        table.evict(downTo: 7, now: now)
        #expect(table.count == 7)
        #expect(table["t3"] == nil && table["t7"] == nil)
        #expect(table["t1"] == nil)
        #expect((2...10).filter { $0 != 3 && $0 != 7 }.allSatisfy { table["t\($0)"] != nil })
        // An extended token is not dropped for its old expiry.
        var extended = record(11, expiresAt: now.addingTimeInterval(-1))
        table["t11"] = extended
        extended.expiresAt = now + 3_600
        table["t11"] = extended
        table["t12"] = record(12, expiresAt: now + 3_600)
        table.evict(downTo: 8, now: now)
        #expect(table["t11"] != nil)
        #expect(table["t2"] == nil)
    }

    @Test("issuing a token past the limit costs a bounded amount of work, not a sort of the table")
    func evictionWork() {
        var table = TokenTable()
        let limit = 5_000
        let now = Date(timeIntervalSince1970: 1_000)
        for serial in 1...(limit + 10_000) {
            table["t\(serial)"] = record(serial, expiresAt: serial % 3 == 0 ? nil : now + Double(serial))
            table.evict(downTo: limit, now: now)
        }
        #expect(table.count == limit)
        #expect(table["t\(limit + 10_000)"] != nil)
        #expect(table["t10000"] == nil)
        // Each issued token is looked at a bounded number of times by eviction: amortised O(1)
        // steps (each O(log n)). The old table sorted every token for every token issued.
        #expect(table.evictionSteps <= 3 * (limit + 10_000), "\(table.evictionSteps) steps")
    }

    @Test("the engine issues Facebook-shaped tokens: EAA and letters and digits only")
    func tokenShape() throws {
        for _ in 0..<50 {
            let token = try FacebookState.facebookLikeToken()
            #expect(token.hasPrefix("EAA"))
            #expect(token.count == 200)
            #expect(token.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) })
        }
        #expect(try FacebookState.facebookLikeToken() != FacebookState.facebookLikeToken())
    }

    @Test(
        "what --log prints cannot forge a line or write a terminal escape",
        arguments: [
            ("/me\nGET /forged 200", #"/me\x0aGET /forged 200"#),
            ("/a\u{1B}[2J", #"/a\x1b[2J"#),
            ("/b\r\u{7F}", #"/b\x0d\x7f"#),
            ("/c\u{2028}d\u{202E}", #"/c\u{2028}d\u{202e}"#),
            (#"/e\x0a"#, #"/e\\x0a"#),
            ("/ok/é", "/ok/é"),
        ])
    func logEscaping(path: String, logged: String) {
        #expect(EmulatorEngine.loggable(path) == logged)
    }

    @Test("the emulator's request log escapes a decoded %0a and %1b in the path")
    func requestLogLine() async throws {
        let lines = LogLines()
        var configuration = EmulatorConfiguration()
        configuration.requestLog = { lines.append($0) }
        let engine = try EmulatorEngine(configuration: configuration)
        _ = engine.handle(EmulatorRequest(method: .get, path: "/x\nGET /admin 200\u{1B}[31m"))
        let logged = lines.all
        #expect(logged.count == 1)
        #expect(!logged[0].contains("\n") && !logged[0].contains("\u{1B}"))
        #expect(logged[0].contains(#"\x0a"#) && logged[0].contains(#"\x1b"#))
    }
}

private final class LogLines: Sendable {
    private let lines = Locked<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}
