/// Escaping for the small HTML pages Sesame serves (the login result page, the emulator's
/// dialogs): one implementation for every module of the package.
package enum HTMLEscaping {
    /// Escapes text for an HTML text node or a quoted attribute.
    package static func escape(_ text: String) -> String {
        var output = ""
        output.reserveCapacity(text.count)
        for character in text {
            switch character {
            case "&": output += "&amp;"
            case "<": output += "&lt;"
            case ">": output += "&gt;"
            case "\"": output += "&quot;"
            case "'": output += "&#39;"
            default: output.append(character)
            }
        }
        return output
    }
}
