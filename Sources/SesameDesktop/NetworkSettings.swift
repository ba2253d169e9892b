import Foundation
import Sesame
import SesameCurl

/// Which CA certificates and which proxy one provider instance's requests use: the
/// `ca_bundle` and `proxy` settings, with the conventions of OpenSSL and libcurl beneath them.
///
/// | setting | per instance (`facebook`; OpenID issuer `work`) | every provider | beneath them |
/// |---|---|---|---|
/// | CA certificates | `SESAME_FACEBOOK_CA_BUNDLE` (`SESAME_OIDC_WORK_CA_BUNDLE`), then the instance's `ca_bundle` key | `SESAME_CA_BUNDLE`, then the config file's top-level `ca_bundle` | `SSL_CERT_FILE` and `SSL_CERT_DIR`, else the system's bundle |
/// | proxy | `SESAME_FACEBOOK_PROXY` (`SESAME_OIDC_WORK_PROXY`), then the instance's `proxy` key | `SESAME_PROXY`, then the config file's top-level `proxy` | libcurl's `https_proxy`/`HTTPS_PROXY`, `http_proxy`, `all_proxy` |
///
/// The first that is set wins. A `ca_bundle` is a PEM file of the CA certificates to trust
/// *instead of* the system's (a private CA, or a TLS-inspecting proxy's); a `proxy` is an
/// address such as `http://proxy.example:3128` or `socks5h://127.0.0.1:1080` (or `none`: go
/// direct whatever the environment says). A configured proxy carries `http` and `https` requests
/// alike, loopback ones included (a built-in emulator's, a local issuer's), except to the hosts
/// `no_proxy` or `NO_PROXY` lists, as libcurl's own variables do: list `127.0.0.1` there to
/// reach those directly.
public struct NetworkSettings: Sendable, Hashable {
    /// The CA file to trust, and where that was set; `nil` for the system's bundle.
    public var caBundle: Sourced<String>?
    /// The CA directory (`SSL_CERT_DIR`), and where it was set.
    public var caDirectory: Sourced<String>?
    /// The proxy, and where it was set; `nil` for libcurl's environment variables.
    public var proxy: Sourced<String>?
    /// The hosts that go direct although ``proxy`` is set (`no_proxy`, else `NO_PROXY`).
    public var noProxy: String

    /// The config file's keys, at the top level and in each provider instance's object.
    public static let configKeys = ["ca_bundle", "proxy"]

    /// Creates settings (tests, apps with their own configuration).
    public init(
        caBundle: Sourced<String>? = nil, caDirectory: Sourced<String>? = nil, proxy: Sourced<String>? = nil,
        noProxy: String = ""
    ) {
        self.caBundle = caBundle
        self.caDirectory = caDirectory
        self.proxy = proxy
        self.noProxy = noProxy
    }

    /// The two settings as a provider instance declares them, with its variables (by
    /// ``ProviderPlugin/environmentVariable(_:instance:)``), for ``ProviderSetting/checkSection(_:path:settings:configuration:aliases:)``
    /// and help.
    public static func settings(variable: (String) -> String?) -> [ProviderSetting] {
        [
            ProviderSetting(
                "ca-bundle", value: "FILE", flag: false, environment: variable("CA_BUNDLE"), configKey: "ca_bundle",
                "A PEM file of the CA certificates to trust instead of the system's (a private CA, a TLS-inspecting "
                    + "proxy's)."),
            ProviderSetting(
                "proxy", value: "URL", flag: false, environment: variable("PROXY"), configKey: "proxy",
                "The proxy requests go through (http://host:port, socks5h://host:port), or none."),
        ]
    }

    /// Resolves the settings of provider instance `instance` of `plugin`.
    ///
    /// - Throws: ``DesktopError`` (78) for a `ca_bundle` that is not a readable file, an
    ///   `SSL_CERT_DIR` that is not a directory, or a `proxy` that is not an address.
    public static func resolve(
        instance: String, plugin: (any ProviderPlugin)?, configuration: DesktopConfiguration,
        environment: [String: String]
    ) throws -> NetworkSettings {
        let own = try plugin.map { try $0.configSection(instance: instance, configuration: configuration) }
        let file = configuration.configFileDescription
        func value(_ key: String, variable: String) throws -> Sourced<String>? {
            let setting = Self.settings(variable: { _ in nil }).first { $0.configKey == key }!
            let instanceVariable = plugin.map { $0.environmentVariable(variable, instance: instance) }
            if let name = instanceVariable, let text = environment[name], !text.isEmpty {
                try setting.check(text, source: name)
                return Sourced(text, source: name)
            }
            if let own, let raw = own.section[key] {
                let source = "\(file) (\(own.path).\(key))"
                return Sourced(try setting.configValue(raw, key: key, source: source), source: source)
            }
            if let text = environment["SESAME_\(variable)"], !text.isEmpty {
                try setting.check(text, source: "SESAME_\(variable)")
                return Sourced(text, source: "SESAME_\(variable)")
            }
            if let raw = configuration.file[key] {
                let source = "\(file) (\(key))"
                return Sourced(try setting.configValue(raw, key: key, source: source), source: source)
            }
            return nil
        }
        var settings = NetworkSettings(
            caBundle: try value("ca_bundle", variable: "CA_BUNDLE"), proxy: try value("proxy", variable: "PROXY"),
            noProxy: environment["no_proxy"] ?? environment["NO_PROXY"] ?? "")
        // OpenSSL's variables, which libcurl does not read, when no setting of Sesame's names a file.
        if settings.caBundle == nil {
            if let path = environment["SSL_CERT_FILE"], !path.isEmpty {
                settings.caBundle = Sourced(path, source: "SSL_CERT_FILE")
            }
            if let path = environment["SSL_CERT_DIR"], !path.isEmpty {
                settings.caDirectory = Sourced(path, source: "SSL_CERT_DIR")
            }
        }
        try settings.check()
        return settings
    }

    private func check() throws {
        if let caBundle {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: caBundle.value, isDirectory: &isDirectory),
                !isDirectory.boolValue, FileManager.default.isReadableFile(atPath: caBundle.value)
            else {
                throw DesktopError(
                    "\(caBundle.source) names '\(caBundle.value.sanitizedForTerminal)', which is not a readable file; "
                        + "it must be a PEM file of the CA certificates to trust (a private CA's, or a TLS-inspecting "
                        + "proxy's).", status: .config)
            }
        }
        if let caDirectory {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: caDirectory.value, isDirectory: &isDirectory),
                isDirectory.boolValue
            else {
                throw DesktopError(
                    "\(caDirectory.source) names '\(caDirectory.value.sanitizedForTerminal)', which is not a "
                        + "directory; it must be a directory of hashed CA certificates (openssl rehash), or unset.",
                    status: .config)
            }
        }
        if let proxy, proxy.value != "none" {
            let schemes = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]
            let components = URLComponents(string: proxy.value.contains("://") ? proxy.value : "http://" + proxy.value)
            guard let components, schemes.contains(components.scheme?.lowercased() ?? ""),
                components.host?.isEmpty == false
            else {
                throw DesktopError(
                    "\(proxy.source) is '\(CurlTransport.ProxyPolicy.url(proxy.value).description.sanitizedForTerminal)'"
                        + ", which is not a proxy address; write it as http://host:port (or "
                        + schemes.dropFirst().map { "\($0)://" }.joined(separator: ", ") + "), or none.",
                    status: .config)
            }
        }
    }

    /// `base` with these certificates and this proxy.
    public func transportConfiguration(
        _ base: CurlTransport.Configuration = CurlTransport.Configuration()
    ) -> CurlTransport.Configuration {
        var configuration = base
        if caBundle != nil || caDirectory != nil {
            configuration.tlsVerification = .certificateAuthorities(
                file: caBundle?.value, directory: caDirectory?.value)
        }
        if let proxy {
            configuration.proxy = proxy.value == "none" ? .direct : .url(proxy.value, except: noProxy)
        }
        return configuration
    }

    /// What to tell someone whose request was refused for an untrusted certificate: which
    /// setting makes Sesame trust the CA that signed it.
    public static var certificateFix: String {
        "if a private CA or a TLS-inspecting proxy signs it, set ca_bundle in the config file (or SESAME_CA_BUNDLE, "
            + "or SSL_CERT_FILE) to a PEM file of that CA's certificate; `\(Desktop.programName) doctor` names the "
            + "certificate's issuer"
    }
}
