#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The process's environment as a dictionary, read from `environ` directly.
///
/// `ProcessInfo.processInfo.environment` gives the same dictionary at about fifteen times the
/// cost (0.8 M instructions for a desktop session's environment, 2% of a whole `sesame token`),
/// and a command reads it once, at its start.
package enum ProcessEnvironment {
    /// Every `NAME=value` entry; of two entries with one name, the first, which `getenv` finds.
    /// An entry without `=` is left out.
    package static func current() -> [String: String] {
        var result: [String: String] = [:]
        // `environ` is NULL after `clearenv()`; as an optional, a null pointer reads as nil.
        let start: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = environ
        guard var entry = start else { return result }
        while let pointer = entry.pointee {
            defer { entry += 1 }
            let length = strlen(pointer)
            let bytes = UnsafeRawBufferPointer(start: pointer, count: length)
            guard let equals = bytes.firstIndex(of: UInt8(ascii: "=")) else { continue }
            let name = String(decoding: bytes[..<equals], as: UTF8.self)
            guard result[name] == nil else { continue }
            result[name] = String(decoding: bytes[(equals + 1)...], as: UTF8.self)
        }
        return result
    }
}
