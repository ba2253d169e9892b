/// The one line of JSON `sesame-keyring-probe` prints: what it writes and what the keyring tests
/// read, one type for both.
package struct KeyringProbeOutput: Codable, Sendable {
    package var ok: Bool
    package var kind: String?
    package var message: String?
    package var found: Bool?
    package var keys: [String]?
    package var backend: String?
    package var warning: String?
    package var status: String?
    /// The token read, for `load-token` (a test's own value).
    package var token: String?

    /// An outcome; only what it says is set.
    package init(
        ok: Bool, kind: String? = nil, message: String? = nil, found: Bool? = nil, keys: [String]? = nil,
        backend: String? = nil, warning: String? = nil, status: String? = nil, token: String? = nil
    ) {
        (self.ok, self.kind, self.message, self.found, self.keys) = (ok, kind, message, found, keys)
        (self.backend, self.warning, self.status, self.token) = (backend, warning, status, token)
    }
}
