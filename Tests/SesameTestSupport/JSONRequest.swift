import Foundation
import Sesame

extension HTTPRequest {
    /// A POST of `body` as JSON to `url`: what tests send to an emulator's admin API.
    package static func postJSON(_ url: URL, _ body: JSONValue = .object([:])) -> HTTPRequest {
        HTTPRequest(
            method: .post, url: url, headers: ["Content-Type": "application/json"], body: Data(body.jsonText.utf8))
    }
}
