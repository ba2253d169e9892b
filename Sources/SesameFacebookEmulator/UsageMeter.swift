import Foundation
import SesameEmulator

/// Counts each app's calls and handler time per minute over a rolling hour, for `X-App-Usage`.
///
/// ``FacebookState`` keeps it behind a lock of its own: calls answered side by side under the
/// engine's read lock count here too.
///
/// Memory is fixed: sixty one-minute buckets per app, however many calls arrive.
struct UsageMeter: Sendable {
    private struct Bucket: Sendable {
        var minute: Int64 = .min
        var calls = 0
        var seconds: Double = 0
    }

    private var buckets: [String: [Bucket]] = [:]

    private static func minute(of date: Date) -> Int64 { Int64((date.timeIntervalSince1970 / 60).rounded(.down)) }

    /// Counts one call of `appID`.
    mutating func count(appID: String, at date: Date) {
        let minute = Self.minute(of: date)
        let slot = Int(((minute % 60) + 60) % 60)
        // One look-up of the app, its buckets mutated in place: no copy of them per call.
        Self.countCall(in: &buckets[appID, default: Array(repeating: Bucket(), count: 60)], slot: slot, minute: minute)
    }

    private static func countCall(in appBuckets: inout [Bucket], slot: Int, minute: Int64) {
        if appBuckets[slot].minute != minute { appBuckets[slot] = Bucket(minute: minute) }
        appBuckets[slot].calls += 1
    }

    /// Adds the time a call of `appID` took to its usage.
    mutating func addTime(_ duration: Duration, appID: String, at date: Date) {
        let minute = Self.minute(of: date)
        let slot = Int(((minute % 60) + 60) % 60)
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
        // One look-up of the app, in place; an app never counted has no usage to add to.
        guard let index = buckets.index(forKey: appID) else { return }
        Self.addSeconds(seconds, in: &buckets.values[index], slot: slot, minute: minute)
    }

    private static func addSeconds(_ seconds: Double, in appBuckets: inout [Bucket], slot: Int, minute: Int64) {
        guard appBuckets[slot].minute == minute else { return }
        appBuckets[slot].seconds += seconds
    }

    /// Calls and seconds of handler time in the last sixty minutes.
    func lastHour(appID: String, at date: Date) -> (calls: Int, seconds: Double) {
        guard let appBuckets = buckets[appID] else { return (0, 0) }
        let minute = Self.minute(of: date)
        var calls = 0
        var seconds: Double = 0
        for bucket in appBuckets where bucket.minute > minute - 60 && bucket.minute <= minute {
            calls += bucket.calls
            seconds += bucket.seconds
        }
        return (calls, seconds)
    }

    /// Whole minutes until the app's calls in the last hour fall to `allowance` or below.
    func minutesUntilBelow(_ allowance: Int, appID: String, at date: Date) -> Int {
        guard let appBuckets = buckets[appID] else { return 0 }
        let minute = Self.minute(of: date)
        let live = appBuckets.filter { $0.minute > minute - 60 && $0.minute <= minute }.sorted { $0.minute < $1.minute }
        var remaining = live.reduce(0) { $0 + $1.calls }
        for bucket in live {
            if remaining <= allowance { break }
            remaining -= bucket.calls
            if remaining <= allowance { return Int(bucket.minute + 60 - minute) }
        }
        return remaining <= allowance ? 0 : 60
    }
}
