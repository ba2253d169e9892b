import Foundation
import SesameEmulator

/// The emulator's issued tokens, by token string, with what it takes to drop the expired ones and
/// then the oldest in logarithmic time when the table is over its limit.
///
/// It replaced a dictionary that was filtered and sorted whole, under the engine's lock, for every
/// token issued past `maxTokens` (34 ms a token at 100,000). Now issuing is O(log n): a FIFO of
/// serials finds the oldest, a min-heap of expiry dates the expired. Entries of both go stale when
/// a token is removed or its expiry changes; a stale entry is skipped when it reaches the front
/// (each is looked at once), and both are rebuilt when stale entries outnumber live ones.
struct TokenTable: Sendable {
    private var records: [String: TokenRecord] = [:]

    private struct Issued {
        var serial: Int
        var token: String
    }
    private struct Expiry {
        var date: Date
        var serial: Int
        var token: String
    }

    /// Tokens in the order they were issued; `queueStart` is the front.
    private var queue: [Issued] = []
    private var queueStart = 0
    /// A binary min-heap of expiry dates.
    private var heap: [Expiry] = []
    /// How many queue or heap entries eviction has looked at, in all: what the tests bound.
    private(set) var evictionSteps = 0

    var count: Int { records.count }
    var values: Dictionary<String, TokenRecord>.Values { records.values }

    subscript(token: String) -> TokenRecord? {
        get { records[token] }
        set {
            guard let record = newValue else {
                records[token] = nil
                return
            }
            let previous = records.updateValue(record, forKey: token)
            if previous?.serial != record.serial { queue.append(Issued(serial: record.serial, token: token)) }
            if let date = record.expiresAt, previous?.expiresAt != date || previous?.serial != record.serial {
                push(Expiry(date: date, serial: record.serial, token: token))
            }
            compactIfMostlyStale()
        }
    }

    /// Removes every token `shouldRemove` picks (an O(n) scan, for admin operations).
    mutating func removeAll(where shouldRemove: (TokenRecord) -> Bool) {
        for record in records.values where shouldRemove(record) { records[record.token] = nil }
    }

    /// Drops tokens expired at `now`, then the oldest, until at most `limit` remain.
    mutating func evict(downTo limit: Int, now: Date) {
        guard records.count > limit else { return }
        while records.count > limit, let top = heap.first, top.date <= now {
            evictionSteps += 1
            popHeap()
            if let record = records[top.token], record.serial == top.serial, record.expiresAt == top.date {
                records[top.token] = nil
            }
        }
        while records.count > limit, queueStart < queue.count {
            evictionSteps += 1
            let oldest = queue[queueStart]
            queueStart += 1
            if records[oldest.token]?.serial == oldest.serial { records[oldest.token] = nil }
        }
        compactIfMostlyStale()
    }

    // MARK: Upkeep

    private mutating func compactIfMostlyStale() {
        let live = max(records.count, 1024)
        if queue.count - queueStart > 2 * live || queueStart > live {
            queue = records.values.sorted { $0.serial < $1.serial }.map { Issued(serial: $0.serial, token: $0.token) }
            queueStart = 0
        }
        if heap.count > 2 * live {
            heap = records.values.compactMap { record in
                record.expiresAt.map { Expiry(date: $0, serial: record.serial, token: record.token) }
            }
            for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
        }
    }

    private static func isBefore(_ a: Expiry, _ b: Expiry) -> Bool {
        a.date < b.date || (a.date == b.date && a.serial < b.serial)
    }

    private mutating func push(_ entry: Expiry) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.isBefore(heap[child], heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func popHeap() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        if !heap.isEmpty { siftDown(0) }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { return }
            var smallest = left
            if left + 1 < heap.count, Self.isBefore(heap[left + 1], heap[left]) { smallest = left + 1 }
            guard Self.isBefore(heap[smallest], heap[parent]) else { return }
            heap.swapAt(smallest, parent)
            parent = smallest
        }
    }
}

/// For `sesame-bench tokens`: the table's cost at scale, without exposing its types.
package enum TokenTableBenchmark {
    /// Fills a table limited to `limit` with `limit` tokens, then times `sample` more (each one
    /// past the limit, so each evicts); returns the mean time per token issued past the limit.
    package static func meanInsertionPastLimit(limit: Int, sample: Int) -> Duration {
        var table = TokenTable()
        let now = Date()
        func record(_ serial: Int) -> TokenRecord {
            TokenRecord(
                token: "EAA\(serial)", kind: .user, appID: "1", userID: "u", serial: serial, issuedAt: now,
                expiresAt: now.addingTimeInterval(Double(serial % 7_200)), isLongLived: false)
        }
        for serial in 1...limit { table[record(serial).token] = record(serial) }
        let started = ContinuousClock.now
        for serial in (limit + 1)...(limit + sample) {
            let issued = record(serial)
            table[issued.token] = issued
            table.evict(downTo: limit, now: now)
        }
        return (ContinuousClock.now - started) / sample
    }
}
