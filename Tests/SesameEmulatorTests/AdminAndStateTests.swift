import Foundation
import Sesame
import Synchronization
import Testing

@testable import SesameEmulator
@testable import SesameFacebookEmulator

@Suite("Admin API")
struct AdminAPITests {
    @Test("users, tokens, clock, apps and health")
    func endpoints() async throws {
        try await Harness.with { h in
            #expect(try await h.admin(.get, "health").json == .object(["ok": .bool(true)]))
            let index = try await h.admin(.get, "")
            #expect(index.json?["endpoints"]?.arrayValue?.isEmpty == false)

            let created = try await h.admin(
                .post, "users", .object(["name": .string("Ada Lovelace"), "email": .string("ada@example.com")]))
            #expect(created.status == 201)
            let id = try #require(created.json?["id"]?.stringValue)
            #expect(id.allSatisfy { $0.isNumber })
            let users = try await h.admin(.get, "users")
            #expect(users.json?["data"]?.arrayValue?.map { $0["id"] }.contains(.string(id)) == true)

            let token = try await h.admin(
                .post, "tokens", .object(["user": .string(id), "permissions": .array([.string("email")])]))
            let accessToken = try #require(token.json?["access_token"]?.stringValue)
            let me = try await h.get("/me", token: accessToken, [("fields", "name,email")])
            #expect(me.json == .object(["name": .string("Ada Lovelace"), "email": .string("ada@example.com")]))

            let clock = try await h.admin(.post, "clock", .object(["advance_seconds": .int(7200)]))
            #expect(clock.json?["offset_seconds"]?.doubleValue == 7200)
            #expect(try await h.get("/me", token: accessToken).subcode == 463)

            let apps = try await h.admin(.get, "apps")
            #expect(apps.json?["data"]?[0]?["secret"] == .string(h.app.secret))

            #expect(try await h.admin(.get, "nowhere").status == 404)
            #expect(try await h.admin(.post, "users", .object(["name": .string("")])).status == 400)
            #expect(try await h.admin(.post, "tokens", .object(["user": .string("404")])).status == 404)
        }
    }

    @Test("changes need a JSON content type and a loopback Host, so a web page cannot make them")
    func crossSiteRefused() async throws {
        try await Harness.with { h in
            let form = try await h.send(.post, "/__sesame/reset", headers: ["Content-Type": "text/plain"])
            #expect(form.status == 415)
            let rebound = try await h.send(
                .post, "/__sesame/reset", headers: ["Content-Type": "application/json", "Host": "evil.example:80"])
            #expect(rebound.status == 403)
            #expect(try await h.admin(.post, "reset").status == 200)
        }
    }

    @Test("reset forgets people, tokens and scenarios but keeps the configuration")
    func reset() async throws {
        try await Harness.with { h in
            let token = try await h.token()
            _ = try await h.admin(.post, "scenarios", .object(["scenario": .string("transient")]))
            #expect(try await h.admin(.post, "reset").status == 200)
            #expect(try await h.get("/me", token: token).code == 190)
            #expect(try await h.admin(.get, "scenarios").json?["data"] == .array([]))
            #expect(try await h.get("/me", token: try await h.token()).status == 200)
        }
    }
}

@Suite("State file")
struct StateFileTests {
    func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-emulator-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("a token obtained in one run is still valid in the next; the file is 0600")
    func persists() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("sesame/emulator.json")
        let (token, postID) = try await Harness.with({ $0.stateFileURL = file }) { h in
            let token = try await h.token(["publish_actions", "email"])
            let post = try await h.post("/me/feed", token: token, [("message", "kept")])
            return (token, try #require(post.json?["id"]?.stringValue))
        }
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        #expect((attributes[.posixPermissions] as? Int).map { $0 & 0o777 } == 0o600)
        #expect(!(try String(contentsOf: file, encoding: .utf8)).isEmpty)

        try await Harness.with({ $0.stateFileURL = file }) { h in
            let me = try await h.get("/me", token: token, [("fields", "id,email")])
            #expect(me.status == 200)
            #expect(me.json?["email"] == .string("sam.sesame@example.com"))
            #expect(try await h.get("/\(postID)", token: token).json?["message"] == .string("kept"))
        }
    }

    @Test("stop() returns only once a save already under way has reached the file")
    func stopWaitsForScheduledSave() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("emulator.json")
        var configuration = EmulatorConfiguration()
        configuration.stateFileURL = file
        let emulator = try Emulator(configuration: configuration)
        _ = try await emulator.start()
        // The writer's queue is held, so the save the changes below schedule is queued and stays
        // under way, not on disk, until the test lets it go: no sleep decides which case is tested.
        let writer = try #require(emulator.engine.writer)
        let gate = DispatchSemaphore(value: 0)
        writer.afterQueuedWrites { gate.wait() }
        for _ in 0..<5_000 { _ = try await emulator.issueToken() }
        let saving = Task { await emulator.engine.saveNow() }
        let stopped = Atomic<Bool>(false)
        let stopping = Task {
            await emulator.stop()
            stopped.store(true, ordering: .sequentiallyConsistent)
        }
        await Task.yield()
        let returnedEarly = stopped.load(ordering: .sequentiallyConsistent)
        #expect(!returnedEarly, "stop() returned while the save was held")
        gate.signal()
        await saving.value
        await stopping.value

        // What a process exiting right after stop() leaves on disk: every token.
        let saved = try #require(JSONValue(parsing: try Data(contentsOf: file)))
        #expect((saved["tokens"]?.arrayValue?.count ?? 0) >= 5_000)
    }

    @Test("a corrupt state file is reported and left as it is")
    func corrupt() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("emulator.json")
        try Data("{not json".utf8).write(to: file)
        chmod(file.path, 0o600)
        var configuration = EmulatorConfiguration()
        configuration.stateFileURL = file
        #expect(throws: EmulatorError.self) { try Emulator(configuration: configuration) }
        #expect(try String(contentsOf: file, encoding: .utf8) == "{not json")
    }

    @Test("a state file others can read is refused with the chmod that fixes it")
    func insecure() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("emulator.json")
        try Data("{}".utf8).write(to: file)
        chmod(file.path, 0o644)
        var configuration = EmulatorConfiguration()
        configuration.stateFileURL = file
        #expect { try Emulator(configuration: configuration) } throws: { error in
            (error as? EmulatorError)?.message.contains("chmod 600") == true
        }
    }

    @Test("a state directory others may use is made private (0700) when the emulator starts and when it saves")
    func looseDirectory() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let stateDirectory = directory.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: stateDirectory, withIntermediateDirectories: false)
        func mode() throws -> Int {
            try #require(FileManager.default.attributesOfItem(atPath: stateDirectory.path)[.posixPermissions] as? Int)
        }
        chmod(stateDirectory.path, 0o777)
        var configuration = EmulatorConfiguration()
        configuration.stateFileURL = stateDirectory.appendingPathComponent("emulator.json")
        let emulator = try Emulator(configuration: configuration)
        #expect(try mode() == 0o700)
        chmod(stateDirectory.path, 0o777)
        _ = try await emulator.issueToken()
        await emulator.save()
        #expect(try mode() == 0o700)
        #expect(FileManager.default.fileExists(atPath: stateDirectory.appendingPathComponent("emulator.json").path))
    }

    @Test("a state file whose directory is a regular file is refused, naming it")
    func directoryIsAFile() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let notADirectory = directory.appendingPathComponent("state")
        try Data().write(to: notADirectory)
        var configuration = EmulatorConfiguration()
        configuration.stateFileURL = notADirectory.appendingPathComponent("emulator.json")
        #expect { try Emulator(configuration: configuration) } throws: { error in
            (error as? EmulatorError)?.message.contains(
                "cannot be kept in its directory: \(notADirectory.path) is not a directory") == true
        }
    }

    @Test("the default state file is under XDG_STATE_HOME, else ~/.local/state")
    func defaultLocation() {
        #expect(
            EmulatorConfiguration.defaultStateFileURL(environment: ["XDG_STATE_HOME": "/x/state"]).path
                == "/x/state/sesame/emulator.json")
        #expect(
            EmulatorConfiguration.defaultStateFileURL(environment: ["HOME": "/home/u"]).path
                == "/home/u/.local/state/sesame/emulator.json")
    }
}
