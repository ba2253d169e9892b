import Foundation
import Sesame

/// An OpenID provider Sesame knows by name: its issuer (with the tenant or host a login fills
/// in), the scopes and authorization parameters a desktop login needs there, and whether the
/// secret it gives a desktop client is public. Each preset's facts cite the provider's own
/// documentation.
///
/// ```swift
/// let google = OIDCPreset.google.configuration(clientID: "1234.apps.googleusercontent.com",
///                                              clientSecret: ClientSecret("GOCSPX-…"))
/// ```
public struct OIDCPreset: Sendable {
    /// The part of the issuer a login chooses: Microsoft's tenant, GitLab's host.
    public struct IssuerPart: Sendable, Hashable {
        /// The setting's name (`tenant`, `host`), also the placeholder in the issuer (`{tenant}`).
        public var name: String
        /// The value when a login gives none (`common`, `gitlab.com`).
        public var defaultValue: String
        /// Values that stand for another one in the issuer (Microsoft's `consumers`, whose
        /// discovery document names the consumer tenant's id as its issuer).
        public var aliases: [String: String]
        /// One sentence of help for the setting.
        public var help: String

        /// Creates an issuer part.
        public init(name: String, defaultValue: String, aliases: [String: String] = [:], help: String) {
            self.name = name
            self.defaultValue = defaultValue
            self.aliases = aliases
            self.help = help
        }

        /// The placeholder in the issuer, `{name}`.
        public var placeholder: String { "{\(name)}" }
    }

    /// The provider id and command name (`google`).
    public var name: String
    /// A human name (`Google`).
    public var displayName: String
    /// The issuer, with ``IssuerPart/placeholder`` where ``issuerPart`` goes.
    public var issuer: String
    /// What a login fills into the issuer, if anything.
    public var issuerPart: IssuerPart?
    /// The scopes a login asks for when it names none.
    public var scopes: [String]
    /// Added to every authorization URL.
    public var authorizationParameters: [(String, String)]
    /// Whether the client secret the provider gives a desktop app is public (it may then be
    /// given on the command line or in the config file).
    public var clientSecretIsPublic: Bool
    /// One line for the providers list.
    public var summary: String
    /// Whether the provider's desktop clients may log in with the device flow its discovery
    /// lists (Google's may not: its device flow is for another client type).
    public var deviceLogin = true

    /// Creates a preset.
    public init(
        name: String, displayName: String, issuer: String, issuerPart: IssuerPart? = nil, scopes: [String],
        authorizationParameters: [(String, String)] = [], clientSecretIsPublic: Bool = false, summary: String
    ) {
        self.name = name
        self.displayName = displayName
        self.issuer = issuer
        self.issuerPart = issuerPart
        self.scopes = scopes
        self.authorizationParameters = authorizationParameters
        self.clientSecretIsPublic = clientSecretIsPublic
        self.summary = summary
    }

    /// `issuer` (the preset's unless another is given) with the issuer part filled in: `value`,
    /// or the part's default.
    ///
    /// - Throws: ``OIDCPresetError`` when `value` is not a tenant id or host name.
    public func issuer(_ issuer: String? = nil, part value: String?) throws -> String {
        let issuer = issuer ?? self.issuer
        guard let part = issuerPart else { return issuer }
        let value = value ?? part.defaultValue
        guard Self.isIssuerPart(value) else { throw OIDCPresetError(preset: self, part: part, value: value) }
        return issuer.replacingOccurrences(of: part.placeholder, with: part.aliases[value] ?? value)
    }

    /// A tenant id, domain or host name (with a port): letters, digits, `-`, `.` and `:`,
    /// nothing that changes the rest of a URL.
    static func isIssuerPart(_ value: String) -> Bool {
        !value.isEmpty && value.count <= 253 && !value.hasPrefix(".") && !value.contains("..")
            && value.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
                    || $0 == "-" || $0 == "." || $0 == ":"
            }
    }

    /// The configuration of a login to this preset as `clientID`.
    public func configuration(
        clientID: String, clientSecret: ClientSecret? = nil, issuer: String? = nil, part: String? = nil
    ) throws -> OIDCConfiguration {
        OIDCConfiguration(
            providerID: ProviderID(name), displayName: displayName, issuer: try self.issuer(issuer, part: part),
            clientID: clientID, clientSecret: clientSecret, scopes: scopes,
            extraAuthorizationParameters: authorizationParameters)
    }
}

/// A tenant or host that cannot go into a preset's issuer.
public struct OIDCPresetError: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// The sentence.
    public var description: String
    init(preset: OIDCPreset, part: OIDCPreset.IssuerPart, value: String) {
        description =
            "'\(value)' is not a \(part.name) \(preset.displayName) knows: \(part.help)"
    }
    /// The same sentence as ``description``.
    public var errorDescription: String? { description }
}

extension OIDCPreset {
    // Google, "OAuth 2.0 for iOS & Desktop Apps"
    // (https://developers.google.com/identity/protocols/oauth2/native-app): a desktop app is a
    // public client, yet the token endpoint (https://oauth2.googleapis.com/token) takes its client
    // id *and* the client secret from the Cloud Console's Clients page, which such an app cannot
    // keep secret ("client_secret is missing." without it). Refresh tokens come only with
    // `access_type=offline` ("This field is only present if the access_type parameter was set to
    // offline", https://cloud.google.com/nodejs/docs/reference/google-auth-library/latest/google-auth-library/credentials),
    // and only on the first consent unless `prompt=consent` asks again
    // (https://developers.google.com/identity/protocols/oauth2/web-server#offline). Refresh
    // tokens do not rotate. Issuer https://accounts.google.com, discovery at
    // https://accounts.google.com/.well-known/openid-configuration (revocation
    // https://oauth2.googleapis.com/revoke, device https://oauth2.googleapis.com/device/code).
    // Its device flow (https://developers.google.com/identity/protocols/oauth2/limited-input-device)
    // is for clients of the "TVs and Limited Input devices" type, not Desktop apps: browser only.
    /// Google: its desktop client's public secret, offline access with consent asked each login.
    public static let google: OIDCPreset = {
        var google = OIDCPreset(
            name: "google", displayName: "Google", issuer: "https://accounts.google.com",
            scopes: ["openid", "email", "profile"],
            authorizationParameters: [("access_type", "offline"), ("prompt", "consent")], clientSecretIsPublic: true,
            summary: "Google (OpenID Connect: browser with PKCE; a Desktop app's client id and its public secret).")
        google.deviceLogin = false
        return google
    }()

    // Microsoft identity platform, "OpenID Connect on the Microsoft identity platform"
    // (https://learn.microsoft.com/entra/identity-platform/v2-protocols-oidc): authority
    // https://login.microsoftonline.com/{tenant}/v2.0, `{tenant}` being `common`, `organizations`,
    // `consumers` or a tenant id; "you can also use the consumer tenant GUID,
    // 9188040d-6c67-4c5b-b112-36a304b66dad, in place of consumers" (whose discovery document names
    // that GUID as issuer). The discovery document of common and organizations names the issuer
    // https://login.microsoftonline.com/{tenantid}/v2.0: each ID token's `iss` holds its `tid`
    // (https://learn.microsoft.com/entra/identity-platform/id-token-claims-reference), which
    // IDTokenValidator puts in the template and compares exactly. A refresh token needs the
    // `offline_access` scope (https://learn.microsoft.com/entra/identity-platform/scopes-oidc).
    // Device login at /{tenant}/oauth2/v2.0/devicecode
    // (https://learn.microsoft.com/entra/identity-platform/v2-oauth2-device-code). Errors carry
    // AADSTS codes in `error_codes` and `error_description`
    // (https://learn.microsoft.com/entra/identity-platform/reference-error-codes). There is no
    // RFC 7009 revocation endpoint.
    /// Microsoft Entra ID (work, school and personal accounts) by tenant.
    public static let microsoft = OIDCPreset(
        name: "microsoft", displayName: "Microsoft", issuer: "https://login.microsoftonline.com/{tenant}/v2.0",
        issuerPart: IssuerPart(
            name: "tenant", defaultValue: "common",
            aliases: ["consumers": "9188040d-6c67-4c5b-b112-36a304b66dad"],
            help: "give common, organizations, consumers, or the tenant's id (a GUID)."),
        scopes: ["openid", "profile", "email", "offline_access"],
        summary: "Microsoft Entra ID (OpenID Connect: device login or browser with PKCE; --tenant common, "
            + "organizations, consumers or a tenant id).")

    // GitLab, "OAuth 2.0 identity provider API" (https://docs.gitlab.com/api/oauth2/):
    // authorization code with PKCE, the device authorization grant from GitLab 17.1, endpoints
    // under /oauth/, access tokens of two hours, and a new refresh token with each refresh. GitLab
    // as an OpenID provider (https://docs.gitlab.com/integration/openid_connect_provider/): issuer
    // https://gitlab.com or the self-managed instance's address, scopes openid, profile, email.
    /// GitLab.com or a self-managed GitLab by host.
    public static let gitlab = OIDCPreset(
        name: "gitlab", displayName: "GitLab", issuer: "https://{host}",
        issuerPart: IssuerPart(
            name: "host", defaultValue: "gitlab.com",
            help: "give the host name of a self-managed GitLab (gitlab.example.com), or none for gitlab.com."),
        scopes: ["openid", "profile", "email"],
        summary: "GitLab (OpenID Connect: device login or browser with PKCE; gitlab.com or --host of your own).")

    /// The OpenID presets Sesame ships.
    public static let all: [OIDCPreset] = [.google, .microsoft, .gitlab]
}
