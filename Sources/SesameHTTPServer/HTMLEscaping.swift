/// Escaping for the small HTML pages Sesame serves (the login result page, the emulator's
/// dialogs, an outside provider's emulator pages): one implementation for all of them.
public enum HTMLEscaping {
    /// Escapes text for an HTML text node or a quoted attribute: `&`, `<`, `>`, `"` and `'`.
    public static func escape(_ text: String) -> String {
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
