import Foundation
import Sesame
import SesameEmulator

extension FacebookState {
    // MARK: - Scenarios

    struct ScenarioEffects {
        var error: GraphError?
        var delay: Duration = .zero
        var dropConnection = false
    }

    /// What the active scenarios do to this Graph request (token scenarios act when the token is
    /// resolved instead). A call inside a batch gets only the error scenarios: delays and dropped
    /// connections belong to the batch's own request.
    func scenarioEffects(for context: GraphContext) -> ScenarioEffects {
        var effects = ScenarioEffects()
        var consumed: [Int] = []
        let userID = context.caller?.userID
        let isPublish = context.method == .post && context.segments.last == "feed"
        for (index, active) in scenarios.enumerated() {
            let scenario = active.setting.scenario
            if scenario.isTokenScenario || scenario == .permissionRevoked || scenario == .legacyForms { continue }
            if let user = active.setting.user, user != userID { continue }
            if let path = active.setting.path, path != context.segments.joined(separator: "/") { continue }
            if context.isBatchItem, scenario == .slow || scenario == .dropConnection { continue }
            switch scenario {
            case .slow:
                effects.delay += .milliseconds(active.setting.delayMs ?? 1000)
                consumed.append(index)
            case .dropConnection:
                effects.dropConnection = true
                consumed.append(index)
            case .duplicatePost:
                guard isPublish, effects.error == nil else { continue }
                effects.error = .duplicatePost
                consumed.append(index)
            default:
                guard effects.error == nil else { continue }
                effects.error = injectedError(active, context: context)
                consumed.append(index)
            }
            if effects.dropConnection { break }
        }
        for index in consumed.reversed() { consumeScenario(at: index) }
        return effects
    }

    /// The error an error-injecting scenario answers with, with its headers.
    func injectedError(_ active: ActiveScenario, context: GraphContext) -> GraphError {
        let appID = appID(for: context)
        let minutes = active.setting.regainAccessMinutes ?? 5
        func businessUsage(id: String, type: String) -> String {
            JSONValue.object([
                id: .array([
                    .object([
                        "type": .string(type), "call_count": .int(100), "total_cputime": .int(91),
                        "total_time": .int(95), "estimated_time_to_regain_access": .int(minutes),
                    ])
                ])
            ]).jsonText
        }
        let full = #"{"call_count":100,"total_cputime":91,"total_time":95}"#
        let objectID = context.caller?.userID ?? appID
        switch active.setting.scenario {
        case .appThrottled:
            return .appThrottled(headers: [
                "X-App-Usage": full, "X-Business-Use-Case-Usage": businessUsage(id: appID, type: "app"),
            ])
        case .userThrottled:
            return .userThrottled(headers: ["X-Business-Use-Case-Usage": businessUsage(id: objectID, type: "user")])
        case .pageThrottled:
            return .pageThrottled(headers: [
                "X-Page-Usage": full, "X-Business-Use-Case-Usage": businessUsage(id: objectID, type: "pages"),
            ])
        case .rateLimited:
            return .customRateLimited(headers: [
                "X-App-Usage": full, "X-Business-Use-Case-Usage": businessUsage(id: appID, type: "custom"),
            ])
        case .transient: return .temporary
        case .unknownError: return .unknown
        case .userMessage: return .blockedWithUserMessage
        default: return .unknown
        }
    }

    /// Activates a scenario; `permission-revoked` and the others stay until cleared or their `count`
    /// runs out.
    @discardableResult
    func activate(_ setting: ScenarioSetting) -> ActiveScenario {
        let active = ActiveScenario(
            id: "s\(nextScenarioNumber)", setting: setting, remaining: setting.count,
            tokenSerialAtActivation: nextSerial - 1)
        nextScenarioNumber += 1
        scenarios.append(active)
        if scenarios.count > limits.maxScenarios { scenarios.removeFirst(scenarios.count - limits.maxScenarios) }
        return active
    }

    func consumeScenario(at index: Int) {
        guard scenarios.indices.contains(index), let remaining = scenarios[index].remaining else { return }
        if remaining <= 1 {
            scenarios.remove(at: index)
        } else {
            scenarios[index].remaining = remaining - 1
        }
    }

    // MARK: - Usage

    func appUsageHeader(appID: String) -> String {
        let now = self.now
        let (calls, time) = usage.withLock { $0.lastHour(appID: appID, at: now) }
        let allowance = Double(max(1, configuration.hourlyCallsPerUser * max(1, installedCount[appID] ?? 0)))
        let callShare = Int(Double(calls) * 100 / allowance)
        // Each call is budgeted 50 ms of handler time.
        let timeShare = Int(time * 100 / (allowance * 0.05))
        return Self.usageText(calls: callShare, time: timeShare)
    }

    /// `{"call_count":calls,"total_cputime":time,"total_time":time}`, written as bytes at once:
    /// string interpolation appended its five pieces one by one, on every Graph answer.
    static func usageText(calls: Int, time: Int) -> String {
        func append(_ literal: StaticString, to buffer: UnsafeMutableBufferPointer<UInt8>, at offset: inout Int) {
            for byte in UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount) {
                buffer[offset] = byte
                offset += 1
            }
        }
        func append(_ number: Int, to buffer: UnsafeMutableBufferPointer<UInt8>, at offset: inout Int) {
            if number < 0 {
                buffer[offset] = UInt8(ascii: "-")
                offset += 1
            }
            // The magnitude's digits, last first, then turned round in place.
            var rest = number.magnitude
            let start = offset
            repeat {
                buffer[offset] = UInt8(ascii: "0") + UInt8(rest % 10)
                offset += 1
                rest /= 10
            } while rest > 0
            var low = start
            var high = offset - 1
            while low < high {
                buffer.swapAt(low, high)
                low += 1
                high -= 1
            }
        }
        // 46 bytes of text and three numbers of at most 20 characters.
        return String(unsafeUninitializedCapacity: 128) { buffer in
            var offset = 0
            append(#"{"call_count":"#, to: buffer, at: &offset)
            append(calls, to: buffer, at: &offset)
            append(#","total_cputime":"#, to: buffer, at: &offset)
            append(time, to: buffer, at: &offset)
            append(#","total_time":"#, to: buffer, at: &offset)
            append(time, to: buffer, at: &offset)
            append("}", to: buffer, at: &offset)
            return offset
        }
    }

    /// Error 4 when rate limits are enforced and the app has used its hourly allowance.
    func rateLimitError(appID: String) -> GraphError? {
        guard configuration.enforcesRateLimits else { return nil }
        let now = self.now
        let allowance = max(1, configuration.hourlyCallsPerUser * max(1, installedCount[appID] ?? 0))
        let (calls, minutes) = usage.withLock { usage in
            let calls = usage.lastHour(appID: appID, at: now).calls
            return (calls, calls > allowance ? usage.minutesUntilBelow(allowance, appID: appID, at: now) : 0)
        }
        guard calls > allowance else { return nil }
        let usageText = #"{"call_count":\#(calls * 100 / allowance),"total_cputime":0,"total_time":0}"#
        let business = JSONValue.object([
            appID: .array([
                .object([
                    "type": .string("app"), "call_count": .int(calls * 100 / allowance), "total_cputime": .int(0),
                    "total_time": .int(0), "estimated_time_to_regain_access": .int(minutes),
                ])
            ])
        ]).jsonText
        return .appThrottled(headers: ["X-App-Usage": usageText, "X-Business-Use-Case-Usage": business])
    }

}
