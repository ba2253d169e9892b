/// An OAuth client secret, kept out of every description, debug print and mirror.
///
/// Only confidential clients have one: a desktop app is a public client and uses PKCE (or the
/// device flow) alone. Providers take it where a client may have one (an OpenID issuer's
/// confidential client, a GitHub App refreshing a user token).
public struct ClientSecret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The secret itself.
    public let value: String
    /// Wraps a secret.
    public init(_ value: String) { self.value = value }
    public var description: String { "ClientSecret(\(Redaction.placeholder))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["value": Redaction.placeholder]) }
}
