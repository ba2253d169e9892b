/// The key of one provider-specific login option, with its type and its value when unset.
///
/// A provider module declares a key for each setting only it understands and adds a typed
/// accessor on ``LoginRequest/Options``, so the core carries the setting without knowing it:
///
/// ```swift
/// enum AudienceKey: LoginOptionKey {
///     static let defaultValue = "everyone"
/// }
///
/// extension LoginRequest.Options {
///     var audience: String {
///         get { self[AudienceKey.self] }
///         set { self[AudienceKey.self] = newValue }
///     }
/// }
/// ```
public protocol LoginOptionKey: Sendable {
    /// The option's type.
    associatedtype Value: Hashable & Sendable
    /// The value an unset option reads as.
    static var defaultValue: Value { get }
}

extension LoginRequest {
    /// Provider-specific settings of a ``LoginRequest``, read and written by key type.
    ///
    /// Two option sets are equal when every key has the same value; a key set to its default
    /// value counts as unset.
    public struct Options: Sendable, Hashable {
        private var values: [ObjectIdentifier: any Hashable & Sendable] = [:]

        /// Creates an empty set: every option reads as its key's default value.
        public init() {}

        /// The value of the option `key`, or the key's default value when it is unset.
        public subscript<Key: LoginOptionKey>(key: Key.Type) -> Key.Value {
            get { values[ObjectIdentifier(key)] as? Key.Value ?? Key.defaultValue }
            set {
                if newValue == Key.defaultValue {
                    values[ObjectIdentifier(key)] = nil
                } else {
                    values[ObjectIdentifier(key)] = newValue
                }
            }
        }

        public static func == (lhs: Options, rhs: Options) -> Bool {
            lhs.values.count == rhs.values.count
                && lhs.values.allSatisfy { key, value in
                    rhs.values[key].map { AnyHashable($0) == AnyHashable(value) } ?? false
                }
        }

        public func hash(into hasher: inout Hasher) {
            // Independent of the dictionary's order: the entries' hashes are combined with XOR.
            var entries = 0
            for (key, value) in values {
                var entry = Hasher()
                entry.combine(key)
                entry.combine(AnyHashable(value))
                entries ^= entry.finalize()
            }
            hasher.combine(values.count)
            hasher.combine(entries)
        }
    }
}
