import Foundation
import Sesame

/// One Graph API version and the dates Facebook gives for it.
public struct GraphAPIVersion: Sendable, Hashable {
    /// The version as it is written in a path: `v27.0`.
    public var name: String
    /// The day it was released (UTC).
    public var released: Date
    /// The first day it no longer answers (UTC); `nil` while Facebook has not announced one.
    public var availableUntil: Date?

    /// Creates a version from its name and its dates written `yyyy-mm-dd`.
    init(_ name: String, released: String, until: String?) {
        self.name = name
        self.released = Self.day(released)
        self.availableUntil = until.map(Self.day)
    }

    /// `yyyy-mm-dd` as the start of that day in UTC.
    static func day(_ text: String) -> Date {
        let parts = text.split(separator: "-").compactMap { Int($0) }
        var components = DateComponents()
        (components.year, components.month, components.day) = (parts[0], parts[1], parts[2])
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(from: components)!
    }

    /// Whether the version no longer answers at `date`.
    public func hasEnded(at date: Date) -> Bool { availableUntil.map { date >= $0 } ?? false }

    /// The version's number, for ordering: `v27.0` is (27, 0).
    var number: (major: Int, minor: Int) { GraphAPIVersions.number(name) ?? (0, 0) }
}

/// The Graph API versions and their end dates, as Facebook's changelog lists them, and what
/// Sesame does with a pinned version.
///
/// A Graph version answers for at least two years; after its end date Facebook answers a call
/// to it as a call to the oldest version still available. Sesame uses ``tested`` unless a
/// version is pinned; a pinned version that has ended is refused, one that ends within six
/// months is reported by `sesame doctor`.
public enum GraphAPIVersions {
    /// Newest first.
    ///
    /// Sources, as stored on 2026-12-07: the versions table of
    /// https://developers.facebook.com/docs/graph-api/changelog/versions/ (the `?locale=de_DE`,
    /// `ja_JP`, `pt_BR` and `id_ID` copies list v26.0 and the end dates of v21.0–v25.0; the English copy
    /// still said "TBD" for them), and for v27.0
    /// https://developers.facebook.com/blog/post/2026/11/04/introducing-graph-api-v27-and-marketing-api-v27/
    public static let all: [GraphAPIVersion] = [
        GraphAPIVersion("v27.0", released: "2026-11-04", until: nil),
        GraphAPIVersion("v26.0", released: "2026-07-29", until: nil),
        GraphAPIVersion("v25.0", released: "2026-02-18", until: "2028-07-29"),
        GraphAPIVersion("v24.0", released: "2025-10-08", until: "2028-02-18"),
        GraphAPIVersion("v23.0", released: "2025-05-29", until: "2027-10-08"),
        GraphAPIVersion("v22.0", released: "2025-01-21", until: "2027-05-20"),
        GraphAPIVersion("v21.0", released: "2024-10-02", until: "2027-01-21"),
        GraphAPIVersion("v20.0", released: "2024-05-21", until: "2026-09-24"),
        GraphAPIVersion("v19.0", released: "2024-01-23", until: "2026-05-21"),
        GraphAPIVersion("v18.0", released: "2023-09-12", until: "2026-01-26"),
        GraphAPIVersion("v17.0", released: "2023-05-23", until: "2025-09-12"),
        GraphAPIVersion("v16.0", released: "2023-02-02", until: "2025-05-14"),
    ]

    /// The version Sesame is tested against, and uses when none is pinned: the newest in ``all``.
    public static let tested = all[0].name

    /// How long before a pinned version's end `sesame doctor` warns: six months.
    public static let warningPeriod: TimeInterval = 183 * 24 * 60 * 60

    /// The entry for `name` (`v27.0`; `v27` reads as `v27.0`).
    public static func version(named name: String) -> GraphAPIVersion? {
        guard let number = number(name) else { return nil }
        return all.first { $0.number == number }
    }

    /// The newest version that answers at `date`.
    public static func newest(at date: Date) -> GraphAPIVersion {
        all.first { !$0.hasEnded(at: date) } ?? all[0]
    }

    /// The oldest version that answers at `date`: the one Facebook serves a call to an ended one with.
    public static func oldestAvailable(at date: Date) -> GraphAPIVersion {
        all.last { !$0.hasEnded(at: date) } ?? all[0]
    }

    /// Where a version stands at a date.
    public enum Standing: Sendable, Hashable {
        /// It answers, and its end (if announced) is more than ``warningPeriod`` away.
        case available
        /// It answers until the date, which is less than ``warningPeriod`` away.
        case endsSoon(Date)
        /// It stopped answering on the date (`nil`: it is older than every version in the table).
        case ended(Date?)
        /// It is newer than every version in the table: Sesame was not tested against it.
        case newerThanKnown
    }

    /// Where `name` stands at `date`.
    public static func standing(of name: String, at date: Date) -> Standing {
        if let version = version(named: name) {
            guard let until = version.availableUntil else { return .available }
            if date >= until { return .ended(until) }
            return until.timeIntervalSince(date) <= warningPeriod ? .endsSoon(until) : .available
        }
        guard let number = number(name), let newest = all.first?.number else { return .ended(nil) }
        return (number.major, number.minor) > (newest.major, newest.minor) ? .newerThanKnown : .ended(nil)
    }

    /// Checks a pinned version.
    ///
    /// - Throws: `AuthError` (`invalid`) when it is not a version, or has ended at `date`: the
    ///   message names the newest version.
    public static func checkPinned(_ name: String, at date: Date) throws(AuthError) {
        guard FacebookProvider.isValidVersion(name) else {
            throw AuthError(
                category: .invalid,
                message: "'\(name)' is not a Graph API version; write it as 'v' and a number, such as '\(tested)'.",
                provider: .facebook)
        }
        if case .ended(let until) = standing(of: name, at: date) {
            let when = until.map { " on \(dayText($0))" } ?? ""
            throw AuthError(
                category: .invalid,
                message: "Graph API \(name) stopped being available\(when); pin \(newest(at: date).name), the newest "
                    + "version, or remove the pin to use the version Sesame is tested against.",
                provider: .facebook)
        }
    }

    /// `date` written `yyyy-mm-dd`.
    public static func dayText(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().dateSeparator(.dash))
    }

    /// (major, minor) of `vN` or `vN.M`.
    static func number(_ name: String) -> (major: Int, minor: Int)? {
        guard FacebookProvider.isValidVersion(name) else { return nil }
        let parts = name.dropFirst().split(separator: ".", omittingEmptySubsequences: false)
        guard let major = Int(parts[0]) else { return nil }
        return (major, parts.count > 1 ? Int(parts[1]) ?? 0 : 0)
    }
}
