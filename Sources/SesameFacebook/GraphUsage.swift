import Foundation
import Sesame

/// How much of its rate limits an app has used, from the Graph API's usage headers.
///
/// Facebook sends these on successful and failed responses alike; each counter is a
/// percentage (0–100) of a rolling one-hour allowance, and throttling starts when any reaches
/// 100. A missing or unreadable header means *unknown*, never 0 %.
///
/// ```swift
/// if let usage = GraphUsage(headers: response.headers), let used = usage.highestPercentage, used > 80 {
///     // slow down before Facebook starts refusing calls
/// }
/// ```
public struct GraphUsage: Sendable, Hashable, CustomStringConvertible {
    /// The three counters Facebook reports, each a percentage; `nil` where not sent.
    public struct Counters: Sendable, Hashable {
        /// `call_count`: calls made.
        public var callCount: Double?
        /// `total_cputime`: CPU time used.
        public var totalCPUTime: Double?
        /// `total_time`: total time used.
        public var totalTime: Double?

        /// Creates counters.
        public init(callCount: Double? = nil, totalCPUTime: Double? = nil, totalTime: Double? = nil) {
            self.callCount = callCount
            self.totalCPUTime = totalCPUTime
            self.totalTime = totalTime
        }

        /// The highest of the counters that were sent.
        public var highest: Double? { [callCount, totalCPUTime, totalTime].compactMap { $0 }.max() }
    }

    /// One entry of `X-Business-Use-Case-Usage`.
    public struct BusinessUseCase: Sendable, Hashable {
        /// The business object (Page, ad account, ...) the usage is for.
        public var objectID: String
        /// The use case, such as `pages`, `ads_management` or `instagram`.
        public var type: String?
        /// The counters.
        public var counters: Counters
        /// `estimated_time_to_regain_access` (sent in minutes): how long until calls are allowed
        /// again when throttled.
        public var estimatedTimeToRegainAccess: Duration?
        /// `ads_api_access_tier`, when sent.
        public var accessTier: String?

        /// Creates an entry.
        public init(
            objectID: String, type: String? = nil, counters: Counters = Counters(),
            estimatedTimeToRegainAccess: Duration? = nil, accessTier: String? = nil
        ) {
            self.objectID = objectID
            self.type = type
            self.counters = counters
            self.estimatedTimeToRegainAccess = estimatedTimeToRegainAccess
            self.accessTier = accessTier
        }
    }

    /// `X-App-Usage`: the app's usage; `nil` when not sent.
    public var app: Counters?
    /// `X-Page-Usage`: the Page's usage for calls with a Page token; `nil` when not sent.
    public var page: Counters?
    /// `X-Business-Use-Case-Usage`, one entry per business object and use case.
    public var businessUseCases: [BusinessUseCase]

    /// Creates usage from values.
    public init(app: Counters? = nil, page: Counters? = nil, businessUseCases: [BusinessUseCase] = []) {
        self.app = app
        self.page = page
        self.businessUseCases = businessUseCases
    }

    /// Reads the usage headers of any Graph response; `nil` when none was present and readable.
    public init?(headers: HTTPHeaders) {
        let app = headers["X-App-Usage"].flatMap(Self.json).flatMap(Self.counters)
        let page = headers["X-Page-Usage"].flatMap(Self.json).flatMap(Self.counters)
        let business = headers["X-Business-Use-Case-Usage"].flatMap(Self.json).map(Self.businessUseCases) ?? []
        guard app != nil || page != nil || !business.isEmpty else { return nil }
        self.init(app: app, page: page, businessUseCases: business)
    }

    /// The highest percentage in any counter; `nil` when no counter was sent.
    public var highestPercentage: Double? {
        ([app?.highest, page?.highest] + businessUseCases.map(\.counters.highest)).compactMap { $0 }.max()
    }

    /// Whether any counter has reached 100 %.
    public var isAtLimit: Bool { (highestPercentage ?? 0) >= 100 }

    /// The longest `estimated_time_to_regain_access` of any business use case; `nil` when none
    /// was sent or all were zero.
    public var estimatedTimeToRegainAccess: Duration? {
        businessUseCases.compactMap(\.estimatedTimeToRegainAccess).filter { $0 > .zero }.max()
    }

    public var description: String {
        var parts: [String] = []
        func format(_ counters: Counters) -> String {
            [("calls", counters.callCount), ("cpu", counters.totalCPUTime), ("time", counters.totalTime)]
                .compactMap { name, value in value.map { "\(name) \(Self.percent($0))" } }.joined(separator: ", ")
        }
        if let app { parts.append("app: \(format(app))") }
        if let page { parts.append("page: \(format(page))") }
        for entry in businessUseCases {
            var text = "\(entry.type ?? "business") \(entry.objectID): \(format(entry.counters))"
            if let wait = entry.estimatedTimeToRegainAccess, wait > .zero {
                text += ", access back in \(Int(wait.inSeconds / 60)) min"
            }
            parts.append(text)
        }
        return parts.joined(separator: "; ")
    }

    private static func percent(_ value: Double) -> String {
        value.rounded() == value ? "\(Int(value))%" : String(format: "%.1f%%", value)
    }

    // MARK: Reading the headers

    private static func json(_ header: String) -> JSONValue? { JSONValue(parsing: Data(header.utf8)) }

    private static func number(_ value: JSONValue?) -> Double? {
        switch value {
        case .number(let number)? where number.isFinite: number
        case .string(let text)?: Double(text.trimmingCharacters(in: .whitespaces)).flatMap { $0.isFinite ? $0 : nil }
        default: nil
        }
    }

    /// `estimated_time_to_regain_access` (minutes) as a wait; `nil` when negative or 10 million
    /// minutes (19 years) or more, which no answer means and a `Duration` may not hold.
    private static func regainTime(minutes: Double?) -> Duration? {
        minutes.flatMap { $0 >= 0 && $0 < 1e7 ? .seconds($0 * 60) : nil }
    }

    private static func counters(_ json: JSONValue) -> Counters? {
        guard case .object(let members) = json else { return nil }
        let counters = Counters(
            callCount: number(members["call_count"] ?? members["call_volume"]),
            totalCPUTime: number(members["total_cputime"] ?? members["cpu_time"]),
            totalTime: number(members["total_time"]))
        return counters.highest == nil ? nil : counters
    }

    private static func businessUseCases(_ json: JSONValue) -> [BusinessUseCase] {
        guard case .object(let objects) = json else { return [] }
        var entries: [BusinessUseCase] = []
        for (objectID, value) in objects.sorted(by: { $0.key < $1.key }) {
            let items = value.arrayValue ?? (value.objectValue != nil ? [value] : [])
            for case .object(let item) in items {
                let minutes = number(item["estimated_time_to_regain_access"])
                let entry = BusinessUseCase(
                    objectID: objectID,
                    type: item["type"]?.stringValue,
                    counters: counters(.object(item)) ?? Counters(),
                    estimatedTimeToRegainAccess: regainTime(minutes: minutes),
                    accessTier: item["ads_api_access_tier"]?.stringValue)
                if entry.counters.highest != nil || entry.estimatedTimeToRegainAccess != nil { entries.append(entry) }
            }
        }
        return entries
    }

    // MARK: As JSON (for GraphErrorDetails.json and the state file)

    /// The usage as JSON, in Facebook's own field names (minutes for the time to regain access).
    public var json: JSONValue {
        func counters(_ counters: Counters) -> [String: JSONValue] {
            var object: [String: JSONValue] = [:]
            if let value = counters.callCount { object["call_count"] = .number(value) }
            if let value = counters.totalCPUTime { object["total_cputime"] = .number(value) }
            if let value = counters.totalTime { object["total_time"] = .number(value) }
            return object
        }
        var object: [String: JSONValue] = [:]
        if let app { object["app"] = .object(counters(app)) }
        if let page { object["page"] = .object(counters(page)) }
        if !businessUseCases.isEmpty {
            object["business_use_cases"] = .array(
                businessUseCases.map { entry in
                    var item = counters(entry.counters)
                    item["id"] = .string(entry.objectID)
                    if let type = entry.type { item["type"] = .string(type) }
                    if let wait = entry.estimatedTimeToRegainAccess {
                        item["estimated_time_to_regain_access"] = .number(wait.inSeconds / 60)
                    }
                    if let tier = entry.accessTier { item["ads_api_access_tier"] = .string(tier) }
                    return .object(item)
                })
        }
        return .object(object)
    }

    /// Reads usage back from ``json``.
    public init?(json: JSONValue) {
        guard case .object(let object) = json else { return nil }
        app = object["app"].flatMap(Self.counters)
        page = object["page"].flatMap(Self.counters)
        businessUseCases = (object["business_use_cases"]?.arrayValue ?? []).compactMap { item in
            guard let id = item["id"]?.stringValue else { return nil }
            return BusinessUseCase(
                objectID: id, type: item["type"]?.stringValue, counters: Self.counters(item) ?? Counters(),
                estimatedTimeToRegainAccess: Self.regainTime(
                    minutes: Self.number(item["estimated_time_to_regain_access"])),
                accessTier: item["ads_api_access_tier"]?.stringValue)
        }
        guard app != nil || page != nil || !businessUseCases.isEmpty else { return nil }
    }
}

extension HTTPResponse {
    /// The Graph API usage headers of this response, when it has any.
    public var graphUsage: GraphUsage? { GraphUsage(headers: headers) }
}
