import Sesame
import Testing

@Suite("HTTPHeaders")
struct HTTPHeadersTests {
    @Test(
        "names match without regard to ASCII case, and only then",
        arguments: [
            ("Content-Type", "content-type", true), ("X-APP-USAGE", "x-app-usage", true), ("Host", "Host", true),
            ("Host", "Hos", false), ("Host", "Hostx", false), ("A-B", "A_B", false), ("É", "é", false),
            ("", "", true), ("[", "{", false),
        ])
    func caseInsensitiveNames(stored: String, asked: String, matches: Bool) {
        var headers = HTTPHeaders([(stored, "value")])
        #expect((headers[asked] == "value") == matches)
        #expect(headers.contains(asked) == matches)
        #expect(headers.values(for: asked) == (matches ? ["value"] : []))
        headers.remove(asked)
        #expect(headers.count == (matches ? 0 : 1))
    }

    @Test("setting a name replaces every field of it, whatever its case, in the first one's place")
    func setReplaces() {
        var headers: HTTPHeaders = ["Set-Cookie": "a", "Accept": "x", "set-cookie": "b", "Host": "h"]
        headers["SET-COOKIE"] = "c"
        #expect(headers.fields.map(\.name) == ["SET-COOKIE", "Accept", "Host"])
        #expect(headers.values(for: "set-cookie") == ["c"])
        headers["accept"] = "y"
        #expect(headers.fields.map(\.name) == ["SET-COOKIE", "accept", "Host"])
        #expect(headers.fields.map(\.value) == ["c", "y", "h"])
        headers["New"] = "n"
        #expect(headers.fields.map(\.name) == ["SET-COOKIE", "accept", "Host", "New"])
        headers["set-cookie"] = nil
        #expect(headers.fields.map(\.name) == ["accept", "Host", "New"])
    }

    @Test("names long and short compare as a plain ASCII case fold says")
    func sameNameAgainstReference() {
        // Short names are stored in the string itself, long ones (over 15 bytes) apart.
        let alphabet: [Character] = ["a", "A", "z", "Z", "-", "@", "[", "`", "{", "é", "É", "0"]
        var generator = SystemRandomNumberGenerator()
        func folded(_ text: String) -> [UInt8] {
            text.utf8.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
        }
        for _ in 0..<3000 {
            let count = Int.random(in: 0...24, using: &generator)
            let a = String((0..<count).map { _ in alphabet.randomElement(using: &generator)! })
            // Half the time the same letters in other cases, so that matches are tried too.
            let b =
                Bool.random(using: &generator)
                ? String(a.map { Bool.random(using: &generator) ? Character($0.uppercased()) : $0 })
                : String((0..<count).map { _ in alphabet.randomElement(using: &generator)! })
            #expect(HTTPHeaders.sameName(a, b) == (folded(a) == folded(b)), "\(Array(a.utf8)) \(Array(b.utf8))")
        }
        #expect(HTTPHeaders.sameName("Access-Control-Allow-Origin", "access-control-allow-origin"))
        #expect(!HTTPHeaders.sameName("Access-Control-Allow-Origin", "access-control-allow-origiN-"))
    }
}
