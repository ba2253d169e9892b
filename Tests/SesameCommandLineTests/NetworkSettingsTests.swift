import Foundation
import Sesame
import SesameCurl
import SesameDesktop
import SesameFacebookPlugin
import SesameOIDCPlugin
import Testing

/// Which CA file and proxy a provider instance's transport gets, and from where.
@Suite("NetworkSettings: ca_bundle, proxy, SSL_CERT_FILE and SSL_CERT_DIR")
struct NetworkSettingsTests {
    /// Two readable files and a directory, the CA files the cases name.
    static let files: (a: String, b: String, c: String, directory: String) = {
        let directory = FileManager.default.temporaryDirectory.appending(path: "sesame-network-settings")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let paths = ["a.pem", "b.pem", "c.pem"].map { directory.appending(path: $0).path }
        for path in paths { _ = FileManager.default.createFile(atPath: path, contents: Data("ca\n".utf8)) }
        return (paths[0], paths[1], paths[2], directory.path)
    }()

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var environment: [String: String]
        var file: [String: JSONValue]
        var instance = "facebook"
        var expectedCA: String?
        var expectedSource: String?
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "nothing set: the system's bundle", environment: [:], file: [:]),
        Case(
            name: "SSL_CERT_FILE, which libcurl ignores, is mapped", environment: ["SSL_CERT_FILE": files.a], file: [:],
            expectedCA: files.a, expectedSource: "SSL_CERT_FILE"),
        Case(
            name: "the top-level ca_bundle wins over SSL_CERT_FILE",
            environment: ["SSL_CERT_FILE": files.a], file: ["ca_bundle": .string(files.b)], expectedCA: files.b,
            expectedSource: "(ca_bundle)"),
        Case(
            name: "SESAME_CA_BUNDLE wins over the top-level ca_bundle",
            environment: ["SESAME_CA_BUNDLE": files.c], file: ["ca_bundle": .string(files.b)], expectedCA: files.c,
            expectedSource: "SESAME_CA_BUNDLE"),
        Case(
            name: "the provider's own ca_bundle wins over SESAME_CA_BUNDLE",
            environment: ["SESAME_CA_BUNDLE": files.c], file: ["facebook": .object(["ca_bundle": .string(files.b)])],
            expectedCA: files.b, expectedSource: "(facebook.ca_bundle)"),
        Case(
            name: "the provider's variable wins over its config key",
            environment: ["SESAME_FACEBOOK_CA_BUNDLE": files.a],
            file: ["facebook": .object(["ca_bundle": .string(files.b)])], expectedCA: files.a,
            expectedSource: "SESAME_FACEBOOK_CA_BUNDLE"),
        Case(
            name: "a named OpenID issuer's own key and variable",
            environment: ["SESAME_OIDC_WORK_CA_BUNDLE": files.c, "SESAME_FACEBOOK_CA_BUNDLE": files.a],
            file: ["oidc": .object(["work": .object(["issuer": .string("https://id.example.com")])])],
            instance: "work", expectedCA: files.c, expectedSource: "SESAME_OIDC_WORK_CA_BUNDLE"),
        Case(
            name: "another provider's setting is not this one's",
            environment: ["SESAME_OIDC_WORK_CA_BUNDLE": files.c], file: ["github": .object([:])], expectedCA: nil),
    ]

    static func resolve(
        _ environment: [String: String], file: [String: JSONValue], instance: String = "facebook"
    )
        throws -> NetworkSettings
    {
        let configuration = DesktopConfiguration(file: file)
        TestProviders.bootstrap()
        let plugin = try Desktop.plugin(named: instance, configuration: configuration)
        return try NetworkSettings.resolve(
            instance: instance, plugin: plugin, configuration: configuration, environment: environment)
    }

    @Test("the CA file comes from the most specific setting that is set", arguments: cases)
    func caBundlePrecedence(_ testCase: Case) throws {
        let settings = try Self.resolve(testCase.environment, file: testCase.file, instance: testCase.instance)
        #expect(settings.caBundle?.value == testCase.expectedCA)
        if let source = testCase.expectedSource { #expect(settings.caBundle?.source.hasSuffix(source) == true) }
        let verification = settings.transportConfiguration().tlsVerification
        #expect(
            verification
                == (testCase.expectedCA.map { .certificateAuthorities(file: $0) }
                    ?? CurlTransport.TLSVerification.system))
    }

    @Test("SSL_CERT_DIR becomes libcurl's CA directory beside SSL_CERT_FILE")
    func certificateDirectory() throws {
        let settings = try Self.resolve(
            ["SSL_CERT_FILE": Self.files.a, "SSL_CERT_DIR": Self.files.directory], file: [:])
        #expect(
            settings.transportConfiguration().tlsVerification
                == .certificateAuthorities(file: Self.files.a, directory: Self.files.directory))
    }

    @Test("a proxy setting replaces libcurl's variables, keeps NO_PROXY's exceptions, and none goes direct")
    func proxy() throws {
        #expect(try Self.resolve([:], file: [:]).transportConfiguration().proxy == .environment)
        let set = try Self.resolve(
            ["SESAME_PROXY": "http://proxy.example:3128", "NO_PROXY": "localhost"], file: [:])
        #expect(set.transportConfiguration().proxy == .url("http://proxy.example:3128", except: "localhost"))
        let own = try Self.resolve(
            ["SESAME_PROXY": "http://proxy.example:3128"], file: ["facebook": .object(["proxy": .string("none")])])
        #expect(own.transportConfiguration().proxy == .direct)
    }

    @Test(
        "a CA file that is not there, and a proxy that is not an address, are refused naming where they were set",
        arguments: [
            (["SESAME_CA_BUNDLE": "/nonexistent/ca.pem"], "SESAME_CA_BUNDLE"),
            (["SESAME_FACEBOOK_PROXY": "ftp://proxy.example"], "SESAME_FACEBOOK_PROXY"),
            (["SSL_CERT_DIR": "/nonexistent"], "SSL_CERT_DIR"),
        ])
    func refused(_ environment: [String: String], source: String) throws {
        let error = try #require(throws: DesktopError.self) { try Self.resolve(environment, file: [:]) }
        #expect(error.status == .config)
        #expect(error.message.hasPrefix(source), "\(error.message)")
    }

    @Test("every provider's object in the config file may have ca_bundle and proxy")
    func configKeysAccepted() throws {
        TestProviders.bootstrap()
        let configuration = DesktopConfiguration(
            file: ["facebook": .object(["ca_bundle": .string(Self.files.a), "proxy": .string("http://p:1")])])
        for plugin in Desktop.providers where plugin.name == "facebook" {
            try plugin.checkConfiguration(configuration)
        }
        let wrong = DesktopConfiguration(file: ["facebook": .object(["ca_bundle": .number(1)])])
        #expect(throws: DesktopError.self) {
            for plugin in Desktop.providers where plugin.name == "facebook" { try plugin.checkConfiguration(wrong) }
        }
    }
}
