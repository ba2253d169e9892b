import Foundation
import Sesame
import SesameEmulator
import Testing

@Suite("Concurrent clients")
struct ConcurrencyTests {
    @Test("many clients at once each get their own correct answer, and every post is kept")
    func concurrentClients() async throws {
        try await Harness.with { h in
            var tokens: [String] = []
            for index in 0..<8 {
                let id = "20000000000000\(index)"
                await h.emulator.addUser(EmulatedUser(id: id, name: "Person \(index)"))
                tokens.append(try await h.token(["publish_actions"], user: id))
            }
            let snapshot = tokens
            let results = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
                for request in 0..<240 {
                    group.addTask {
                        let person = request % snapshot.count
                        if request % 3 == 0 {
                            let reply = try await h.post(
                                "/me/feed", token: snapshot[person], [("message", "post \(request)")])
                            return (
                                person, reply.json?["id"]?.stringValue?.hasPrefix("20000000000000\(person)_") == true
                            )
                        }
                        let reply = try await h.get("/v19.0/me", token: snapshot[person])
                        return (person, reply.json?["id"] == .string("20000000000000\(person)"))
                    }
                }
                var all: [(Int, Bool)] = []
                for try await result in group { all.append(result) }
                return all
            }
            #expect(results.count == 240)
            #expect(results.allSatisfy { $0.1 })
            var total = 0
            for token in tokens {
                total +=
                    try await h.get("/me/feed", token: token, [("limit", "100")]).json?["data"]?.arrayValue?.count ?? 0
            }
            #expect(total == 80)
        }
    }
}
