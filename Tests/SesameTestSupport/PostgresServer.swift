import Foundation
import SesamePostgres

#if canImport(Glibc)
    import Glibc
#endif

/// A throw-away PostgreSQL server: a new cluster (`initdb`) in a temporary directory, listening
/// on 127.0.0.1 at a port picked free and on a Unix socket in that directory, with trust
/// authentication for the `postgres` user. PostgreSQL refuses to run as root, so when the tests
/// run as root the server's programs run as the `postgres` user (with `runuser`), and the
/// directory belongs to that user.
package struct PostgresServer: Sendable {
    package let directory: URL
    package let port: Int
    package let binaries: URL

    /// A connection string for the server's `postgres` database.
    package var connectionString: String { "host=127.0.0.1 port=\(port) user=postgres dbname=postgres" }

    /// A configuration for the server, with short timeouts.
    package var configuration: PostgresConfiguration {
        PostgresConfiguration(connectionString: connectionString, connectTimeout: .seconds(5))
    }

    package struct Failure: Error, CustomStringConvertible { package var description: String }

    /// Starts a server; returns once it accepts connections.
    ///
    /// - Throws: when PostgreSQL's server programs are not installed, saying to run
    ///   scripts/bootstrap, or when a step fails, with what it printed.
    ///
    /// - Parameter password: when set, the `postgres` user's password, and connections over TCP
    ///   must give it (SCRAM); without it, every connection is trusted.
    /// - Parameter tls: when true, the server also speaks TLS, with a certificate for `localhost`
    ///   and 127.0.0.1 signed by a CA made for it, in ``caFile``.
    package static func start(password: String? = nil, tls: Bool = false) async throws -> PostgresServer {
        let binaries = try serverBinaries()
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appending(
            path: "sesame-postgres-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
        do {
            if getuid() == 0 {
                guard let user = getpwnam("postgres") else {
                    throw Failure(
                        description: "The tests run as root but there is no 'postgres' user to run PostgreSQL as; "
                            + "run scripts/bootstrap (it installs Debian's postgresql, which makes that user).")
                }
                guard chown(directory.path, user.pointee.pw_uid, user.pointee.pw_gid) == 0 else {
                    throw Failure(description: "chown of \(directory.path) failed: \(String(cString: strerror(errno)))")
                }
            }
            let port = try Sockets.unusedPort()
            let server = PostgresServer(directory: directory, port: port, binaries: binaries)
            var authentication = ["-A", "trust"]
            if let password {
                let file = directory.appending(path: "password")
                try Data(password.utf8).write(to: file)
                if getuid() == 0, let user = getpwnam("postgres") {
                    chown(file.path, user.pointee.pw_uid, user.pointee.pw_gid)
                }
                authentication = ["--auth-local=trust", "--auth-host=scram-sha-256", "--pwfile=\(file.path)"]
            }
            try await server.run(
                "initdb", ["-D", server.dataDirectory, "-U", "postgres", "--no-sync", "-E", "UTF8"] + authentication)
            if tls { try await server.makeCertificates() }
            // The port was free when it was picked; another test's server may take it before this
            // one binds it. Then the next free port is tried, a few times.
            var started = server
            for attempt in 1...5 {
                do {
                    try await started.startServer()
                    return started
                } catch let failure as Failure
                    where failure.description.contains("Address already in use") && attempt < 5
                {
                    started = PostgresServer(directory: directory, port: try Sockets.unusedPort(), binaries: binaries)
                }
            }
            return started
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    /// Stops the server, waits until it has, and removes its directory.
    package func stop() async {
        do {
            try await stopServer()
        } catch {
            print("could not stop the test's PostgreSQL server: \(error)")
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts the server on the cluster in ``directory``; returns once it accepts connections.
    package func startServer() async throws {
        try await run(
            "pg_ctl",
            [
                "-D", dataDirectory, "-l", directory.appending(path: "server.log").path, "-w", "-t", "60",
                "-o", "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1 -c fsync=off", "start",
            ])
    }

    /// Stops the server (fast shutdown: open connections are ended) and waits until it has; the
    /// cluster stays for ``startServer()``. Stopping a stopped server does nothing.
    package func stopServer() async throws {
        // pg_ctl status: 0 running, 3 not running.
        guard try await run("pg_ctl", ["-D", dataDirectory, "status"], accepting: [0, 3]) == 0 else { return }
        try await run("pg_ctl", ["-D", dataDirectory, "-m", "fast", "-w", "-t", "60", "stop"])
    }

    private var dataDirectory: String { directory.appending(path: "data").path }

    /// The CA that signed a TLS server's certificate (``start(password:tls:)``).
    package var caFile: URL { directory.appending(path: "ca.crt") }

    /// Makes a CA and a server certificate signed by it (for `localhost` and 127.0.0.1) with
    /// openssl, and turns TLS on in the cluster's configuration.
    private func makeCertificates() async throws {
        let data = URL(fileURLWithPath: dataDirectory)
        try Data("subjectAltName=DNS:localhost,IP:127.0.0.1\n".utf8).write(to: directory.appending(path: "san.ext"))
        let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try await Self.openssl(
            ["req", "-x509"] + curve + [
                "-keyout", directory.appending(path: "ca.key").path, "-out", caFile.path, "-days", "2",
                "-subj", "/CN=Sesame test CA",
            ])
        try await Self.openssl(
            ["req"] + curve + [
                "-keyout", data.appending(path: "server.key").path, "-out",
                directory.appending(path: "server.csr").path,
                "-subj", "/CN=localhost",
            ])
        try await Self.openssl([
            "x509", "-req", "-in", directory.appending(path: "server.csr").path, "-CA", caFile.path, "-CAkey",
            directory.appending(path: "ca.key").path, "-CAcreateserial", "-out",
            data.appending(path: "server.crt").path,
            "-days", "2", "-extfile", directory.appending(path: "san.ext").path,
        ])
        let configuration = data.appending(path: "postgresql.conf")
        let handle = try FileHandle(forWritingTo: configuration)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n".utf8))
        try handle.close()
        for file in ["server.key", "server.crt"] {
            let path = data.appending(path: file).path
            chmod(path, 0o600)
            if getuid() == 0, let user = getpwnam("postgres") { chown(path, user.pointee.pw_uid, user.pointee.pw_gid) }
        }
    }

    /// Runs `openssl ARGUMENTS`, which must succeed.
    package static func openssl(_ arguments: [String]) async throws {
        let result = try await ProcessRunner.run(URL(fileURLWithPath: "/usr/bin/openssl"), arguments)
        guard result.status == 0 else {
            throw Failure(description: "openssl \(arguments.joined(separator: " ")) failed: \(result.standardError)")
        }
    }

    /// Runs one of PostgreSQL's programs, as the `postgres` user when this process is root, and
    /// returns its exit status, which must be one of `accepting`.
    @discardableResult
    private func run(_ program: String, _ arguments: [String], accepting: Set<Int32> = [0]) async throws -> Int32 {
        let executable = binaries.appending(path: program)
        let result =
            getuid() == 0
            ? try await ProcessRunner.run(
                URL(fileURLWithPath: "/usr/sbin/runuser"), ["-u", "postgres", "--", executable.path] + arguments,
                killAfter: .seconds(120))
            : try await ProcessRunner.run(executable, arguments, killAfter: .seconds(120))
        guard accepting.contains(result.status) else {
            let log = (try? String(contentsOf: directory.appending(path: "server.log"), encoding: .utf8)) ?? ""
            throw Failure(
                description: "\(program) \(arguments.joined(separator: " ")) failed with status \(result.status):\n"
                    + result.standardOutput + result.standardError + log)
        }
        return result.status
    }

    /// The directory of the newest installed PostgreSQL's server programs (Debian keeps each
    /// major version in /usr/lib/postgresql/<version>/bin).
    private static func serverBinaries() throws -> URL {
        let root = URL(fileURLWithPath: "/usr/lib/postgresql")
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        let candidates = versions.compactMap { Int($0) }.sorted(by: >).map { root.appending(path: "\($0)/bin") }
        guard
            let binaries = candidates.first(where: {
                FileManager.default.isExecutableFile(atPath: $0.appending(path: "initdb").path)
                    && FileManager.default.isExecutableFile(atPath: $0.appending(path: "pg_ctl").path)
            })
        else {
            throw Failure(
                description: "PostgreSQL's server programs (initdb, pg_ctl) are not installed in "
                    + "/usr/lib/postgresql/<version>/bin; run scripts/bootstrap, which installs Debian's postgresql.")
        }
        return binaries
    }
}

/// Runs `body` with a new PostgreSQL server (asking for `password` over TCP, when set), and
/// stops it whether `body` returned or threw.
package func withPostgres<T>(
    password: String? = nil, tls: Bool = false, _ body: (PostgresServer) async throws -> T
) async throws -> T {
    try await withStarted(
        { try await PostgresServer.start(password: password, tls: tls) }, stop: { await $0.stop() }, body)
}
