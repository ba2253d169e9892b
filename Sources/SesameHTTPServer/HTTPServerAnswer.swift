/// What a handler that runs on the server's own thread gives back: an answer to send at once,
/// or work to run in a task.
///
/// A server made with ``HTTPServer/init(configuration:answering:)`` calls its handler on
/// libmicrohttpd's thread as soon as a request is complete. Answering ``now(_:)`` costs no task,
/// no suspension of the connection and no thread hop, which is most of what a request costs a
/// fast handler; but while the handler runs, no other connection of that server is served, so it
/// must only compute (take a lock for microseconds, build bytes) and never wait. Anything that
/// waits (a sleep, a file, another server, a large body to parse) goes in ``later(_:)``.
///
/// ```swift
/// let server = HTTPServer { request in
///     guard request.path == "/slow" else { return .now(.text("hi")) }
///     return .later {
///         try? await Task.sleep(for: .seconds(1))
///         return .text("late")
///     }
/// }
/// ```
public enum HTTPServerAnswer: Sendable {
    /// The response, sent at once from the server's thread.
    case now(HTTPServerResponse)
    /// Work that may wait, run in a task as an `async` handler is; the connection waits for it.
    case later(@Sendable () async -> HTTPServerResponse)
}
