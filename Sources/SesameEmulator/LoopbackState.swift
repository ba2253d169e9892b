import Foundation
import Sesame

/// What the state of every emulator on the loopback kit keeps: its active scenarios, how far its
/// clock was moved, the requests per path and the refresh-token families.
package protocol LoopbackState: Sendable {
    /// A scenario's setting, as the emulator's admin API and Swift API take it.
    associatedtype ScenarioSetting: Sendable

    var scenarios: [CountedScenario<ScenarioSetting>] { get set }
    /// Seconds the emulator's clock is ahead of the real one.
    var clockOffset: TimeInterval { get set }
    var requestCounts: [String: Int] { get set }
    var families: RefreshFamilies { get set }
}

extension LoopbackState {
    /// The emulator's time: the real time moved by the admin API's clock.
    package var now: Date { Date().addingTimeInterval(clockOffset) }

    /// What `GET /__sesame/stats` answers at least: the refresh counters, the clock's offset and
    /// the requests per path.
    package var statsMembers: [String: JSONValue] {
        var members = families.counters.jsonMembers
        members["clock_offset"] = .number(clockOffset)
        members["requests"] = .object(requestCounts.mapValues { .number(Double($0)) })
        return members
    }

    /// Answers the admin requests every such emulator answers alike: `DELETE /__sesame/scenarios`,
    /// `POST /__sesame/clock` (`{"advance": seconds}`) and `GET /__sesame/stats` (the members
    /// `stats` makes of the state); `nil` for any other request.
    package mutating func commonAdmin(
        _ request: LoopbackRequest, stats: (Self) -> [String: JSONValue] = { $0.statsMembers }
    ) -> Reply? {
        switch (request.method, request.path) {
        case (.delete, "/__sesame/scenarios"):
            scenarios.removeAll()
            return Reply.json(.object(["cleared": .bool(true)]))
        case (.post, "/__sesame/clock"):
            clockOffset += request.json?["advance"]?.doubleValue ?? 0
            return Reply.json(.object(["offset": .number(clockOffset)]))
        case (.get, "/__sesame/stats"):
            return Reply.json(.object(stats(self)))
        default:
            return nil
        }
    }
}
