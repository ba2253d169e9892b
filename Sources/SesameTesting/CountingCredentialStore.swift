import Foundation
import Sesame

/// A `CredentialStore` double that passes every call to another store and counts the calls,
/// so a test can prove that a refresh saved its token exactly once, or that two opens shared
/// one read.
///
/// ```swift
/// let store = CountingCredentialStore(InMemoryCredentialStore(), loadDelay: .milliseconds(50))
/// _ = try await session.freshToken { try await refresh($0) }
/// #expect(store.saveCount == 1)
/// ```
public final class CountingCredentialStore: CredentialStore {
    private struct Counts {
        var loads = 0
        var saves = 0
        var deletes = 0
    }

    private let base: any CredentialStore
    private let loadDelay: Duration
    private let counts = Locked(Counts())

    /// Counts the calls made to `base`. Each `load` first waits `loadDelay` (zero by default),
    /// so that concurrent callers overlap in a test.
    public init(_ base: any CredentialStore = InMemoryCredentialStore(), loadDelay: Duration = .zero) {
        self.base = base
        self.loadDelay = loadDelay
    }

    /// `load` calls so far.
    public var loadCount: Int { counts.withLock { $0.loads } }
    /// `save` calls so far.
    public var saveCount: Int { counts.withLock { $0.saves } }
    /// `delete` calls so far.
    public var deleteCount: Int { counts.withLock { $0.deletes } }

    public func save(_ credential: StoredCredential) async throws {
        counts.withLock { $0.saves += 1 }
        try await base.save(credential)
    }

    public func load(_ key: CredentialKey) async throws -> StoredCredential? {
        counts.withLock { $0.loads += 1 }
        if loadDelay > .zero { try await Task.sleep(for: loadDelay) }
        return try await base.load(key)
    }

    @discardableResult public func delete(_ key: CredentialKey) async throws -> Bool {
        counts.withLock { $0.deletes += 1 }
        return try await base.delete(key)
    }

    public func list(provider: ProviderID?) async throws -> [StoredCredential] {
        try await base.list(provider: provider)
    }

    public var backendDescription: String { "counting (\(base.backendDescription))" }
}
