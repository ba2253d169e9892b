import Foundation
import Sesame

#if canImport(Glibc)
    import Glibc
#endif

/// A throw-away PostgreSQL for `sesame-bench fleet`: a new cluster in a temporary directory, on
/// 127.0.0.1 and a free port, trusting the `postgres` user; removed when it stops. As root, the
/// server's programs run as the `postgres` user (PostgreSQL refuses root). Needs Debian's
/// `postgresql`, which scripts/bootstrap installs.
struct BenchPostgres {
    struct Failure: Error, CustomStringConvertible { var description: String }

    let directory: URL
    let port: UInt16
    let binaries: String

    /// A libpq connection string for the server's `postgres` database.
    var connectionString: String { "host=127.0.0.1 port=\(port) user=postgres dbname=postgres" }

    static func start() throws -> BenchPostgres {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap { Int($0) }
        guard
            let version = versions.sorted().last(where: {
                FileManager.default.isExecutableFile(atPath: "\(root)/\($0)/bin/initdb")
            })
        else {
            throw Failure(
                description: "PostgreSQL's server programs are not installed in \(root)/<version>/bin; run "
                    + "scripts/bootstrap, which installs Debian's postgresql.")
        }
        let directory = FileManager.default.temporaryDirectory.appending(path: "sesame-bench-postgres-\(getpid())")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
        if getuid() == 0 {
            guard let user = getpwnam("postgres"), chown(directory.path, user.pointee.pw_uid, user.pointee.pw_gid) == 0
            else {
                try? FileManager.default.removeItem(at: directory)
                throw Failure(description: "no 'postgres' user to run PostgreSQL as; run scripts/bootstrap.")
            }
        }
        let server = BenchPostgres(
            directory: directory, port: try CLIBenchmark.closedPort(), binaries: "\(root)/\(version)/bin")
        do {
            try server.run("initdb", ["-D", server.data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"])
            try server.run(
                "pg_ctl",
                [
                    "-D", server.data, "-l", directory.appending(path: "server.log").path, "-w", "-t", "60", "-o",
                    "-p \(server.port) -k \(directory.path) -c listen_addresses=127.0.0.1", "start",
                ])
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        return server
    }

    /// Stops the server (waiting until it has) and removes its directory.
    func stop() {
        try? run("pg_ctl", ["-D", data, "-m", "fast", "-w", "-t", "60", "stop"])
        try? FileManager.default.removeItem(at: directory)
    }

    private var data: String { directory.appending(path: "data").path }

    /// Runs one of PostgreSQL's programs (as `postgres` when this process is root), its output
    /// to a file: the server `pg_ctl start` leaves running would hold a pipe open.
    private func run(_ program: String, _ arguments: [String]) throws {
        let executable = "\(binaries)/\(program)"
        let output = directory.appending(path: "\(program).out")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        defer { try? handle.close() }
        let process = ChildProcess(
            executableURL: URL(fileURLWithPath: getuid() == 0 ? "/usr/sbin/runuser" : executable),
            arguments: getuid() == 0 ? ["-u", "postgres", "--", executable] + arguments : arguments,
            standardInput: .null, standardOutput: .handle(handle), standardError: .handle(handle))
        try process.run()
        let status = process.waitUntilExit()
        guard status == 0 else {
            let log = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            throw Failure(description: "\(program) failed with status \(status)\n\(log)")
        }
    }
}
