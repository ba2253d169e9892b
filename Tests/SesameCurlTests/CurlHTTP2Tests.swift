import Foundation
import Sesame
import Testing

@testable import SesameCurl

/// `nghttpd` (Debian's nghttp2-server): a server that speaks only HTTP/2, so any answer from it
/// was carried over HTTP/2. It serves files from its directory's `docs` and logs every frame
/// with its connection's id (`[id=N]`) in `frames.log`.
enum NGHTTP2Server {
    static let executable = "/usr/sbin/nghttpd"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    /// Starts the server with `files` (name → contents) in its document root.
    static func start(files: [String: String]) async throws -> TLSServer {
        try await TLSServer(name: "sesame-h2") { directory in
            let documents = directory.appendingPathComponent("docs")
            try FileManager.default.createDirectory(at: documents, withIntermediateDirectories: true)
            for (name, contents) in files {
                try Data(contents.utf8).write(to: documents.appendingPathComponent(name))
            }
        } start: { port, certificate, key, directory in
            let logPath = directory.appendingPathComponent("frames.log").path
            guard FileManager.default.createFile(atPath: logPath, contents: nil) else { throw POSIXError(.EIO) }
            let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
            defer { try? log.close() }
            let process = ChildProcess(
                executableURL: URL(fileURLWithPath: Self.executable),
                arguments: [
                    "-a", "127.0.0.1", "-d", directory.appendingPathComponent("docs").path, "-v", String(port), key,
                    certificate,
                ],
                standardInput: .null, standardOutput: .handle(log), standardError: .null, diesWithParent: true)
            try await process.start()
            return process
        }
    }
}

extension TLSServer {
    /// The HTTP/2 connections an ``NGHTTP2Server`` has logged frames for (the readiness probe's
    /// connection is logged too, but only as closed).
    var connectionsSeen: Set<String> {
        let log = (try? String(contentsOf: directory.appendingPathComponent("frames.log"), encoding: .utf8)) ?? ""
        var ids: Set<String> = []
        for line in log.split(separator: "\n") where line.hasPrefix("[id=") && line.contains(" frame ") {
            if let end = line.firstIndex(of: "]") { ids.insert(String(line[..<end])) }
        }
        return ids
    }
}

@Suite(
    "CurlTransport over HTTP/2",
    .serialized,
    .enabled(
        if: NGHTTP2Server.available && OpenSSLServer.available,
        "needs nghttpd and openssl (Debian packages nghttp2-server and openssl, in scripts/bootstrap)"))
struct CurlHTTP2Tests {
    static let body = #"{"id":"100000000000001","name":"Sam Sesame"}"#

    @Test("over HTTPS, HTTP/2 is used when the server offers it, and 20 requests at once share one connection")
    func multiplexed() async throws {
        let server = try await NGHTTP2Server.start(files: ["me.json": Self.body])
        defer { server.stop() }
        let transport = CurlTransport(
            configuration: .init(tlsVerification: .certificateAuthorities(file: server.certificatePath)))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    let response = try await transport.send(HTTPRequest(url: server.url("/me.json")))
                    #expect(response.status == 200)
                    #expect(String(decoding: response.body, as: UTF8.self) == Self.body)
                }
            }
            try await group.waitForAll()
        }
        #expect(server.connectionsSeen.count == 1, "connections: \(server.connectionsSeen.sorted())")
    }

    @Test("a lone caller waits inline on an HTTP/2 connection, and a crowd after it shares that connection")
    func inlineThenCrowdOverHTTP2() async throws {
        let server = try await NGHTTP2Server.start(files: ["me.json": Self.body])
        defer { server.stop() }
        let transport = CurlTransport(
            configuration: .init(tlsVerification: .certificateAuthorities(file: server.certificatePath)),
            inlineBudget: .seconds(5))
        for _ in 0..<10 {
            // Off the cooperative pool: the inline wait holds the thread it runs on.
            let response = try await BlockingWaitExecutor.run {
                try await transport.send(HTTPRequest(url: server.url("/me.json")))
            }
            #expect(String(decoding: response.body, as: UTF8.self) == Self.body)
        }
        #expect(transport.engine.counters.finishedInline.load(ordering: .relaxed) == 9)
        try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<20 {
                group.addTask {
                    try await transport.send(HTTPRequest(url: server.url(index % 5 == 0 ? "/nothing" : "/me.json")))
                        .status
                }
            }
            var statuses: [Int] = []
            for try await status in group { statuses.append(status) }
            #expect(statuses.sorted() == Array(repeating: 200, count: 16) + Array(repeating: 404, count: 4))
        }
        #expect(server.connectionsSeen.count == 1, "connections: \(server.connectionsSeen.sorted())")
    }
}
