import Foundation
import Sesame
import SesameDesktop
import SesameFacebook
import SesameFacebookPlugin
import SesameTestSupport
import Testing

/// What a user with a real, current Facebook app meets (issue 50): the pinned Graph version and
/// Facebook Login for Business, through the built `sesame` against the built-in emulator.
@Suite("sesame and today's Graph API: versions, business logins")
struct FacebookPlatformProcessTests {
    init() { TestProviders.bootstrap() }

    @Test("a pinned Graph version that has ended is refused by login, and doctor says which one to pin")
    func endedVersionRefused() async throws {
        let cli = try CLIHarness(environment: ["SESAME_FACEBOOK_GRAPH_VERSION": "v19.0"])
        let login = try await cli.run("sesame", ["login", "facebook", "--scopes", "email"])
        cli.record("sesame login facebook (v19.0 pinned)", login)
        #expect(login.status != 0)
        #expect(login.standardError.contains("Graph API v19.0 stopped being available on 2026-05-21"), "\(login)")
        #expect(login.standardError.contains("pin \(GraphAPIVersions.tested)"), "\(login)")
        #expect(login.standardError.contains("SESAME_FACEBOOK_GRAPH_VERSION"), "\(login)")
        #expect(try await cli.storedTokens().isEmpty)

        // A real app's settings, its addresses refused at once on loopback.
        let doctor = try await cli.run(
            "sesame", ["doctor"],
            environment: [
                "SESAME_FACEBOOK_APP_ID": "1234567890", "SESAME_FACEBOOK_GRAPH_URL": "http://127.0.0.1:9",
                "SESAME_FACEBOOK_DIALOG_URL": "http://127.0.0.1:9",
            ])
        #expect(
            doctor.standardOutput.contains(
                "Facebook Graph API v19.0, pinned by SESAME_FACEBOOK_GRAPH_VERSION, "
                    + "stopped being available on 2026-05-21"), "\(doctor)")
    }

    @Test("status with an ended Graph version pinned exits 78, a setting to put right, not 75 (try again later)")
    func statusWithEndedVersion() async throws {
        let cli = try CLIHarness()
        let login = try await cli.run(
            "sesame", ["login", "facebook"], environment: ["SESAME_EMULATOR_APPROVE": "auto"])
        try #require(login.status == 0, "\(login.standardError)")
        let status = try await cli.run("sesame", ["status"], environment: ["SESAME_FACEBOOK_GRAPH_VERSION": "v19.0"])
        #expect(status.status == 78, "\(status)")
        #expect(
            (status.standardOutput + status.standardError).contains("stopped being available on 2026-05-21"),
            "\(status)")
    }

    @Test(
        "doctor: a problem once ended, a warning six months ahead, a note for a newer one (at 2026-12-07)",
        arguments: [
            ("v19.0", DoctorLine.Level.problem, "stopped being available on 2026-05-21"),
            ("v21.0", .warning, "stops being available on 2027-01-21"),
            ("v25.0", .ok, "v25.0, pinned by"), ("v30.0", .info, "newer than the versions this Sesame knows"),
        ])
    func doctorLine(version: String, level: DoctorLine.Level, text: String) {
        let today = Date(timeIntervalSince1970: 1_796_601_600)
        let line = FacebookPlugin.doctorLine(pinnedVersion: version, source: "SESAME_FACEBOOK_GRAPH_VERSION", at: today)
        #expect(line.level == level)
        #expect(line.text.contains(text), "\(line.text)")
        if level == .problem || level == .warning { #expect(line.fix?.contains("pin v27.0") == true) }
    }

    @Test("--config-id logs in with a Login for Business configuration; status and permissions list show its objects")
    func businessLogin() async throws {
        let cli = try CLIHarness()
        let login = try await cli.start("sesame", ["login", "facebook", "--config-id", "800000000000001"])
        try await cli.approveDevice(of: login)
        let result = await login.finish()
        cli.record("sesame login facebook --config-id", result)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput.contains("pages_show_list"), "the configuration's permissions were granted")

        let status = try await cli.run("sesame", ["status", "--json", "--timeout", "60"])
        let document = try #require(JSONValue(parsing: Data(status.standardOutput.utf8)))
        let account = try #require(document["providers"]?[0]?["accounts"]?[0])
        let granular = try #require(account["granular_scopes"]?.arrayValue)
        #expect(
            granular.contains(
                .object([
                    "scope": .string("pages_show_list"),
                    "target_ids": .array([.string("200000000000001"), .string("200000000000002")]),
                ])), "\(granular)")
        #expect(granular.contains { $0["scope"] == .string("business_management") })
        let words = try await cli.run("sesame", ["status", "--timeout", "60"])
        #expect(words.standardOutput.contains("pages_show_list for 200000000000001, 200000000000002"), "\(words)")

        let list = try await cli.run("sesame", ["permissions", "facebook", "list", "--json"])
        #expect(list.status == 0, "\(list.standardError)")
        let listing = try #require(JSONValue(parsing: Data(list.standardOutput.utf8)))
        #expect(listing["granted"]?.arrayValue?.contains(.string("business_management")) == true, "\(listing)")
        #expect(listing["granular_scopes"]?.arrayValue == granular)
        let plain = try await cli.run("sesame", ["permissions", "facebook"])
        #expect(plain.standardOutput.contains("granted   business_management  for 300000000000001"), "\(plain)")
        cli.expectNoTokenLeaks(try await cli.storedTokens())
    }

    @Test("without --config-id the same person's login records no per-object grants")
    func plainLoginHasNone() async throws {
        let cli = try CLIHarness()
        let login = try await cli.start("sesame", ["login", "facebook", "--scopes", "email"])
        try await cli.approveDevice(of: login)
        #expect(await login.finish().status == 0)
        let list = try await cli.run("sesame", ["permissions", "facebook", "list", "--json"])
        let listing = try #require(JSONValue(parsing: Data(list.standardOutput.utf8)))
        #expect(listing["granular_scopes"] == .array([]))
    }
}
