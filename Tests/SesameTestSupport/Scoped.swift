// Shared by the test targets that start servers, emulators or processes: the scoped form of a
// teardown. A `defer` cannot await, and a `Task` made in one outlives the test that made it.

/// Starts something with `start`, runs `body` with it, and awaits `stop` whether `body` returned
/// or threw, so that nothing a test started outlives it.
///
/// A `body` whose only `try`s are in `#expect` or `#require` is written `{ x throws in`: the
/// compiler decides whether a closure throws before it expands the macros in it.
public func withStarted<Resource, T>(
    _ start: () async throws -> Resource, stop: (Resource) async -> Void, _ body: (Resource) async throws -> T
) async throws -> T {
    let resource = try await start()
    do {
        let result = try await body(resource)
        await stop(resource)
        return result
    } catch {
        await stop(resource)
        throw error
    }
}
