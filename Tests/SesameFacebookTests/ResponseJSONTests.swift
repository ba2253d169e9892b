import Foundation
import Sesame
import Testing

@testable import SesameFacebook

@Suite("The response JSON reader")
struct ResponseJSONTests {
    @Test(
        "it reads what the core's JSON parser reads, and refuses what it refuses",
        arguments: [
            "1", "-0.5e3", "\"x\"", "true", "null", "[]", "{}", " [1, 2 ,3] ", #"{"a":{"b":[true,false,null]}}"#,
            #""\u00e9\ud83d\ude00\n\/""#, #"{"a":1,"a":2}"#, "01", "1.", "-", "[1,]", "[1,,]", "[,]", "{\"a\":1,}",
            "{,}", "{\"a\"}", "{\"a\":}", "[1 2]",
            "\"\u{01}\"", "\"\\x\"", "\"\\ud800\"", "1e400", "[", "]", "tru", "nulll", "{\"a\":1}}", "",
            #"{"error":{"message":"Error validating access token: User 1.","type":"OAuthException","code":190}}"#,
            #"{"error":{"code":190,"error_subcode":458}}"#, #"{"a":"b","c":"d"}"#, #"{"a":1,"b":2}"#,
        ])
    func agreesWithTheCore(text: String) {
        let data = Data(text.utf8)
        #expect(ResponseJSON.parse(data) == JSONValue(parsing: data))
    }
}
