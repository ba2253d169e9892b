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
}
