import Foundation
import Sesame
import SesameDesktop

/// One OpenID issuer as the command line knows it: resolved like Facebook's settings in
/// ``SesameDesktop/DesktopConfiguration``, flags first, then the environment, then
/// `$XDG_CONFIG_HOME/sesame/config.json`, and last the issuer and client of the previous login
/// under the same name (so `sesame token oidc` works after `sesame login oidc --issuer ...`).
///
/// | setting | flag | environment (`oidc` / name `work`) | config file |
/// |---|---|---|---|
/// | issuer | `--issuer` | `SESAME_OIDC_ISSUER` / `SESAME_OIDC_WORK_ISSUER` | `oidc.NAME.issuer` |
/// | client id | `--client-id` | `SESAME_OIDC_CLIENT_ID` / `SESAME_OIDC_WORK_CLIENT_ID` | `oidc.NAME.clientID` |
/// | scopes | `--scopes` (per login) | `SESAME_OIDC_SCOPES` / `SESAME_OIDC_WORK_SCOPES` | `oidc.NAME.scopes` |
struct OIDCSettings: Sendable, Equatable {
    /// The name on the command line, and the provider id the tokens are stored under.
    var name: String
    var issuer: Sourced<String>
    var clientID: Sourced<String>
    /// The scopes a login asks for when it names none (empty: the library's default).
    var scopes: [String]

    /// The environment variable for `setting` of issuer `name`.
    static func variable(_ setting: String, name: String) -> String {
        name == "oidc"
            ? "SESAME_OIDC_\(setting)"
            : "SESAME_OIDC_\(name.uppercased().replacingOccurrences(of: "-", with: "_"))_\(setting)"
    }

    /// Whether `name` can name an issuer: lower-case letters, digits, `-` and `_`, a letter first.
    static func isValidName(_ name: String) -> Bool {
        guard let first = name.first, first.isASCII, first.isLetter, first.isLowercase, name.count <= 40 else {
            return false
        }
        return name.allSatisfy { ($0.isASCII && ($0.isLowercase || $0.isNumber)) || $0 == "-" || $0 == "_" }
    }

    /// The `oidc` object of the config file, by name.
    static func configured(environment: [String: String]) throws -> [String: [String: JSONValue]] {
        let url = DesktopConfiguration.defaultConfigFileURL(environment: environment)
        guard let data = FileManager.default.contents(atPath: url.path) else { return [:] }
        guard let object = JSONValue(parsing: data)?.objectValue else {
            throw CommandFailure(
                "The config file \(url.path) is not a JSON object; fix it or remove it (see `sesame doctor`).",
                status: DesktopError.Status.config.rawValue)
        }
        var issuers: [String: [String: JSONValue]] = [:]
        for (name, value) in object["oidc"]?.objectValue ?? [:] {
            guard isValidName(name), name != "facebook", let entry = value.objectValue else {
                throw CommandFailure(
                    "The config file \(url.path) has an oidc entry '\(name)' that is not usable: names are lower-case "
                        + "letters, digits, '-' and '_' (not 'facebook'), and each is an object such as "
                        + #"{"issuer": "https://...", "clientID": "...", "scopes": ["openid"]}."#,
                    status: DesktopError.Status.config.rawValue)
            }
            issuers[name] = entry
        }
        return issuers
    }

    /// The issuer names configured in the config file or the environment, sorted.
    static func configuredNames(environment: [String: String]) -> [String] {
        (try? configured(environment: environment).keys.sorted()) ?? []
    }

    /// Resolves the settings of issuer `name`.
    ///
    /// - Throws: ``CommandFailure`` (64) saying how to give a missing issuer or client id, or
    ///   (78) for a bad config file or an issuer that is not an http(s) URL.
    static func resolve(
        name: String, issuer flagIssuer: String? = nil, clientID flagClientID: String? = nil,
        environment: [String: String], command: String
    ) throws -> OIDCSettings {
        let file = try configured(environment: environment)[name] ?? [:]
        let path = DesktopConfiguration.defaultConfigFileURL(environment: environment).path
        let remembered = OIDCRememberedIssuers(environment: environment).read()[name]
        func setting(_ flag: String?, flagName: String, _ variable: String, _ key: String) -> Sourced<String>? {
            if let flag, !flag.isEmpty { return Sourced(flag, source: flagName) }
            let variable = Self.variable(variable, name: name)
            if let value = environment[variable], !value.isEmpty { return Sourced(value, source: variable) }
            if let value = file[key]?.stringValue, !value.isEmpty {
                return Sourced(value, source: "\(path) (oidc.\(name).\(key))")
            }
            if let value = remembered?[key]?.stringValue, !value.isEmpty {
                return Sourced(value, source: "the previous 'sesame login \(name)'")
            }
            return nil
        }
        func missing(_ what: String, flag: String, _ variable: String, _ key: String) -> CommandFailure {
            let elsewhere =
                name == "oidc"
                ? "set \(Self.variable(variable, name: name)), as in 'sesame login oidc --issuer https://id.example.com "
                    + "--client-id ID'"
                : "set \(Self.variable(variable, name: name)), or add \"\(key)\" to oidc.\(name) in \(path)"
            return CommandFailure(
                "no \(what) is configured for '\(name)', so 'sesame \(command) \(name)' cannot reach it; give \(flag) "
                    + "to 'sesame login \(name)' or \(elsewhere).", status: ExitStatus.usage)
        }
        guard let issuer = setting(flagIssuer, flagName: "--issuer", "ISSUER", "issuer") else {
            throw missing("issuer URL", flag: "--issuer URL", "ISSUER", "issuer")
        }
        guard let url = URL(string: issuer.value), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
            url.host != nil
        else {
            throw CommandFailure(
                "\(issuer.source) is '\(issuer.value)', which is not an http(s) issuer URL; write it as "
                    + "https://accounts.example.com.", status: ExitStatus.usage)
        }
        guard let clientID = setting(flagClientID, flagName: "--client-id", "CLIENT_ID", "clientID") else {
            throw missing("client id", flag: "--client-id ID", "CLIENT_ID", "clientID")
        }
        var scopes: [String] = []
        if let text = environment[variable("SCOPES", name: name)], !text.isEmpty {
            scopes = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        } else if let list = file["scopes"]?.arrayValue {
            scopes = list.compactMap(\.stringValue)
        } else if let text = file["scopes"]?.stringValue {
            scopes = text.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init)
        }
        return OIDCSettings(name: name, issuer: issuer, clientID: clientID, scopes: scopes)
    }
}

/// The issuer and client of the last login under each name: `$XDG_STATE_HOME/sesame/oidc-issuers.json`,
/// replaced atomically. No secrets.
struct OIDCRememberedIssuers: Sendable {
    var url: URL

    init(environment: [String: String]) {
        url = XDG.stateDirectory(environment: environment).appendingPathComponent("oidc-issuers.json")
    }

    func read() -> [String: JSONValue] {
        FileManager.default.contents(atPath: url.path).flatMap { JSONValue(parsing: $0)?.objectValue } ?? [:]
    }

    func remember(_ settings: OIDCSettings) throws {
        var all = read()
        all[settings.name] = .object([
            "issuer": .string(settings.issuer.value), "clientID": .string(settings.clientID.value),
        ])
        try FileManager.default.createDirectory(
            at: url.deletingLastPathComponent(), withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        try Data(JSONValue.object(all).jsonText.utf8).write(to: url, options: .atomic)
    }
}
