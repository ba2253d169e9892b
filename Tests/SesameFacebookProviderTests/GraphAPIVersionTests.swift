import Foundation
import Sesame
import SesameFacebook
import Testing

/// The day these tests stand on, whatever today is: 2026-12-07 (UTC).
private let today = Date(timeIntervalSince1970: 1_796_601_600)
private let day: TimeInterval = 86_400

@Suite("Graph API versions: the table, the default, pinned versions")
struct GraphAPIVersionTests {
    @Test("the default is the newest version in the table, and it answers for more than a year from today")
    func defaultIsCurrent() throws {
        #expect(FacebookProvider.defaultGraphVersion == GraphAPIVersions.all.first?.name)
        #expect(FacebookProvider(appID: "1").graphVersion == FacebookProvider.defaultGraphVersion)
        let entry = try #require(GraphAPIVersions.version(named: FacebookProvider.defaultGraphVersion))
        if let until = entry.availableUntil { #expect(until.timeIntervalSince(today) > 365 * day) }
        #expect(GraphAPIVersions.standing(of: FacebookProvider.defaultGraphVersion, at: today) == .available)
    }

    @Test("the table is newest first, each version released after the next and ending no earlier")
    func tableIsOrdered() {
        for (newer, older) in zip(GraphAPIVersions.all, GraphAPIVersions.all.dropFirst()) {
            #expect(newer.released > older.released, "\(newer.name) after \(older.name)")
            if let a = newer.availableUntil, let b = older.availableUntil { #expect(a >= b) }
        }
    }

    @Test(
        "where a version stands on 2026-12-07",
        arguments: [
            ("v27.0", "available"), ("v27", "available"), ("v25.0", "available"), ("v23.0", "available"),
            ("v22.0", "endsSoon 2027-05-20"),
            ("v21.0", "endsSoon 2027-01-21"), ("v20.0", "ended 2026-09-24"), ("v19.0", "ended 2026-05-21"),
            ("v2.12", "ended"), ("v28.0", "newer"), ("v99.0", "newer"),
        ])
    func standing(version: String, expected: String) {
        let text: String =
            switch GraphAPIVersions.standing(of: version, at: today) {
            case .available: "available"
            case .endsSoon(let until): "endsSoon \(GraphAPIVersions.dayText(until))"
            case .ended(let until): until.map { "ended \(GraphAPIVersions.dayText($0))" } ?? "ended"
            case .newerThanKnown: "newer"
            }
        #expect(text == expected)
    }

    @Test("time comes from the caller: v22.0 warns six months before 2027-05-20 and has ended on it")
    func injectedDate() {
        let until = GraphAPIVersion.endOf("v22.0")
        #expect(GraphAPIVersions.standing(of: "v22.0", at: until.addingTimeInterval(-200 * day)) == .available)
        #expect(GraphAPIVersions.standing(of: "v22.0", at: until.addingTimeInterval(-150 * day)) == .endsSoon(until))
        #expect(GraphAPIVersions.standing(of: "v22.0", at: until) == .ended(until))
        #expect(GraphAPIVersions.oldestAvailable(at: until).name == "v23.0")
    }

    @Test("a pinned version that has ended is refused with a sentence naming the newest")
    func endedPinRefused() throws {
        #expect(throws: Never.self) { try GraphAPIVersions.checkPinned("v21.0", at: today) }
        #expect(throws: Never.self) { try GraphAPIVersions.checkPinned("v30.0", at: today) }
        let error = try #require(throws: AuthError.self) { try GraphAPIVersions.checkPinned("v19.0", at: today) }
        #expect(error.message.contains("v19.0 stopped being available on 2026-05-21"), "\(error.message)")
        #expect(error.message.contains("pin v27.0"), "\(error.message)")
        let bad = try #require(throws: AuthError.self) { try GraphAPIVersions.checkPinned("19", at: today) }
        #expect(bad.message.contains("is not a Graph API version"))
    }
}

extension GraphAPIVersion {
    static func endOf(_ name: String) -> Date { GraphAPIVersions.version(named: name)!.availableUntil! }
}
