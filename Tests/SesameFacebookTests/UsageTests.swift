import Foundation
import Sesame
import Testing

@testable import SesameFacebook

@Suite("Rate-limit usage headers")
struct UsageTests {
    static let business =
        #"{"1234":[{"type":"pages","call_count":100,"total_cputime":20,"total_time":30,"estimated_time_to_regain_access":5}],"#
        + #""5678":[{"type":"ads_management","call_count":40,"total_cputime":"12.5","total_time":3,"estimated_time_to_regain_access":0,"ads_api_access_tier":"standard_access"}]}"#

    @Test("X-App-Usage is read as percentages, on a successful response too")
    func appUsage() throws {
        let response = HTTPResponse(
            status: 200, headers: ["x-app-usage": #"{"call_count":28,"total_time":25,"total_cputime":"7"}"#],
            body: Data("{}".utf8))
        let usage = try #require(response.graphUsage)
        #expect(usage.app == GraphUsage.Counters(callCount: 28, totalCPUTime: 7, totalTime: 25))
        #expect(usage.highestPercentage == 28)
        #expect(!usage.isAtLimit)
        #expect(usage.page == nil)
        #expect(usage.businessUseCases.isEmpty)
    }

    @Test(
        "X-Business-Use-Case-Usage gives one entry per object and use case, with the time to regain access in minutes")
    func businessUsage() throws {
        let usage = try #require(GraphUsage(headers: ["X-Business-Use-Case-Usage": Self.business]))
        #expect(usage.businessUseCases.map(\.objectID) == ["1234", "5678"])
        #expect(usage.businessUseCases[0].type == "pages")
        #expect(usage.businessUseCases[0].estimatedTimeToRegainAccess == .seconds(300))
        #expect(usage.businessUseCases[1].counters.totalCPUTime == 12.5)
        #expect(usage.businessUseCases[1].accessTier == "standard_access")
        #expect(usage.estimatedTimeToRegainAccess == .seconds(300))
        #expect(usage.highestPercentage == 100)
        #expect(usage.isAtLimit)
        #expect(usage.description.contains("pages 1234: calls 100%"))
        #expect(GraphUsage(json: usage.json) == usage)
    }

    @Test(
        "usage read back from JSON drops a time to regain access that is negative or absurdly long, as the header does",
        arguments: ["1e300", "-5", "1e7", "\"1e300\""])
    func usageJSONExtremeRegainTime(minutes: String) throws {
        let text =
            #"{"business_use_cases":[{"id":"1","type":"ads","call_count":100,"estimated_time_to_regain_access":"#
            + minutes + "}]}"
        let json = try #require(JSONValue(parsing: Data(text.utf8)))
        let usage = try #require(GraphUsage(json: json))
        #expect(usage.businessUseCases.map(\.objectID) == ["1"])
        #expect(usage.estimatedTimeToRegainAccess == nil)
    }

    @Test(
        "a missing or unreadable header is unknown, not zero",
        arguments: [
            HTTPHeaders(), ["X-App-Usage": "not json"], ["X-App-Usage": "{}"],
            ["X-App-Usage": #"{"call_count":"lots"}"#],
            ["X-Business-Use-Case-Usage": "[]"], ["X-Business-Use-Case-Usage": #"{"1":[{"type":"pages"}]}"#],
        ])
    func unknownUsage(headers: HTTPHeaders) {
        #expect(GraphUsage(headers: headers) == nil)
        let error = taxonomy.classify(status: 400, headers: headers, body: graphError(code: 4))
        #expect(error.graphUsage == nil)
        #expect(error.retryAfter == nil)
    }

    @Test("a throttling error waits at least the estimated time to regain access")
    func throttlingHint() throws {
        let error = taxonomy.classify(
            status: 400, headers: ["X-Business-Use-Case-Usage": Self.business], body: graphError(code: 80001))
        #expect(error.category == .throttling)
        #expect(error.retryAfter == .seconds(300))
        let usage = try #require(error.graphUsage)
        #expect(usage.businessUseCases.count == 2)
    }

    @Test("the usage rides on any error, but only throttling takes its wait as a hint")
    func usageOnOtherErrors() {
        let error = taxonomy.classify(
            status: 400, headers: ["X-Business-Use-Case-Usage": Self.business],
            body: graphError(code: 190, subcode: 463))
        #expect(error.graphUsage?.isAtLimit == true)
        #expect(error.retryAfter == nil)
    }

    @Test(
        "a Retry-After header in seconds is a hint for errors that are retried",
        arguments: [
            (["Retry-After": "7"], 400, graphError(code: 4), .seconds(7)),
            (["Retry-After": "7"], 503, Data("<html/>".utf8), .seconds(7)),
            (["Retry-After": "7"], 400, graphError(code: 506), nil),
            (["Retry-After": "soon"], 400, graphError(code: 4), nil),
            (["Retry-After": "-1"], 400, graphError(code: 4), nil),
            (["Retry-After": "600", "X-Business-Use-Case-Usage": business], 400, graphError(code: 4), .seconds(600)),
            (["Retry-After": "60", "X-Business-Use-Case-Usage": business], 400, graphError(code: 4), .seconds(300)),
        ] as [(HTTPHeaders, Int, Data, Duration?)])
    func retryAfter(headers: HTTPHeaders, status: Int, body: Data, expected: Duration?) {
        #expect(taxonomy.classify(status: status, headers: headers, body: body).retryAfter == expected)
    }

    @Test("X-Page-Usage is read like X-App-Usage")
    func pageUsage() {
        let usage = GraphUsage(headers: ["X-Page-Usage": #"{"call_count":99.5}"#])
        #expect(usage?.page?.callCount == 99.5)
        #expect(usage?.highestPercentage == 99.5)
    }
}
