import Foundation

extension Redaction {
    /// Secrets shorter than this are not searched for: replacing every `a` in a message would
    /// make it unreadable and hide nothing (no real token is this short).
    public static let shortestRedactedSecret = 8

    /// `text` with every occurrence of each of `secrets` replaced by ``placeholder``: as it is,
    /// percent-encoded, and form-encoded. Use it with the credentials a request carried, so that
    /// a server that echoes a token back (in an error message, an HTML page, a JSON field) does
    /// not put it into an error's text, whatever characters the token holds.
    public static func redacting(_ secrets: [String], in text: String) -> String {
        var text = text
        for secret in variants(of: secrets) where text.contains(secret) {
            text = text.replacingOccurrences(of: secret, with: placeholder)
        }
        return text
    }

    /// The strings to look for: each secret long enough to be one, with its encoded forms, the
    /// longest first (so that an encoded form is replaced whole, not after its raw prefix).
    static func variants(of secrets: [String]) -> [String] {
        var found = Set<String>()
        for secret in secrets where secret.utf8.count >= shortestRedactedSecret {
            found.insert(secret)
            found.insert(FormEncoding.encode([("", secret)]).dropFirst().description)
            if let encoded = secret.addingPercentEncoding(withAllowedCharacters: .alphanumerics) {
                found.insert(encoded)
            }
        }
        return found.sorted { $0.utf8.count > $1.utf8.count }
    }
}

extension JSONValue {
    /// The value with every string (member names included) passed through
    /// ``Redaction/redacting(_:in:)``.
    public func redacting(_ secrets: [String]) -> JSONValue {
        let variants = Redaction.variants(of: secrets)
        guard !variants.isEmpty else { return self }
        return redacting(variants: variants)
    }

    private func redacting(variants: [String]) -> JSONValue {
        func clean(_ text: String) -> String {
            var text = text
            for secret in variants where text.contains(secret) {
                text = text.replacingOccurrences(of: secret, with: Redaction.placeholder)
            }
            return text
        }
        switch self {
        case .string(let text): return .string(clean(text))
        case .array(let elements): return .array(elements.map { $0.redacting(variants: variants) })
        case .object(let members):
            var cleaned: [String: JSONValue] = [:]
            for (key, value) in members { cleaned[clean(key)] = value.redacting(variants: variants) }
            return .object(cleaned)
        default: return self
        }
    }
}

extension AuthError {
    /// The error with `secrets` (the credentials of the request that failed) replaced by
    /// ``Redaction/placeholder`` wherever the server echoed them: in ``message``,
    /// ``userTitle``, ``userMessage``, ``body``, ``details`` and an underlying error that is a
    /// provider's details.
    public func redacting(_ secrets: [String]) -> AuthError {
        guard !Redaction.variants(of: secrets).isEmpty else { return self }
        var copy = self
        copy.message = Redaction.redacting(secrets, in: message)
        copy.userTitle = userTitle.map { Redaction.redacting(secrets, in: $0) }
        copy.userMessage = userMessage.map { Redaction.redacting(secrets, in: $0) }
        copy.body = body?.redacting(secrets)
        copy.details = details.map { $0.redacting(secrets) }
        if let underlying = underlyingError as? any ProviderErrorDetails & Error {
            copy.underlyingError = underlying.redacting(secrets)
        }
        return copy
    }
}
