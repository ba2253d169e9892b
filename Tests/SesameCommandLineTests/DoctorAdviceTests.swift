import Foundation
import SesameDesktop
import SesamePassDesktop
import Testing

@testable import SesameCommandLine

/// `sesame doctor`'s advice for a machine without a keyring names only the stores the program
/// registered (`Desktop.bootstrap(storage:)`): pass only where `PassStorage` is registered, the
/// file always.
@Suite("doctor's storage advice follows the registered stores")
struct DoctorAdviceTests {
    /// A place without a keyring, as doctor recognises it.
    enum Place: String, CaseIterable, CustomTestStringConvertible {
        case ssh = "an SSH session"
        case container = "a container"
        case wsl = "WSL"
        var testDescription: String { rawValue }

        var environment: [String: String] { self == .ssh ? ["SSH_TTY": "/dev/pts/0"] : [:] }
        func fileExists(_ path: String) -> Bool { self == .container && path == "/.dockerenv" }
        var procVersion: String { self == .wsl ? "Linux version 5.15 (Microsoft)" : "Linux version 6.1" }
    }

    /// Every fix doctor gives in `place`, and for a machine without a session bus.
    static func fixes(_ place: Place, backends: [any StorageBackend]) async -> [String] {
        let lines =
            DoctorCommand.placeLines(
                environment: place.environment, backends: backends, fileExists: place.fileExists,
                procVersion: { place.procVersion })
            + (await DoctorCommand.busLines(environment: [:], backends: backends))
        return lines.compactMap(\.fix)
    }

    @Test("a program without PassStorage is never told to use pass; the file is offered", arguments: Place.allCases)
    func withoutPass(_ place: Place) async throws {
        let fixes = await Self.fixes(place, backends: [])
        try #require(fixes.count == 2, "\(fixes)")
        for fix in fixes {
            #expect(!fix.contains("pass"), "\(fix)")
            #expect(!fix.contains("GPG_TTY"), "\(fix)")
            #expect(fix.contains("--storage file"), "\(fix)")
        }
    }

    @Test("a program with PassStorage is told `pass init KEYID` (and, over SSH, GPG_TTY)", arguments: Place.allCases)
    func withPass(_ place: Place) async throws {
        let fixes = await Self.fixes(place, backends: [PassStorage()])
        try #require(fixes.count == 2, "\(fixes)")
        for fix in fixes { #expect(fix.contains("pass init KEYID"), "\(fix)") }
        #expect(fixes[0].contains("GPG_TTY") == (place == .ssh), "\(fixes[0])")
    }
}
