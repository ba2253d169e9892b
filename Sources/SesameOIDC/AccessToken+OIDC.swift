import Foundation
import Sesame

extension AccessToken {
    /// The person's name as the stored ID token gives it (`name`, else `preferred_username`,
    /// else `email`), for display; `nil` without an ID token or any of these claims. The ID
    /// token was checked when it was accepted; it is read here, not checked again.
    public var idTokenPersonName: String? {
        guard let idToken, let claims = try? JSONWebToken(compact: idToken).claims else { return nil }
        for name in ["name", "preferred_username", "email"] {
            if let value = claims[name]?.stringValue, !value.isEmpty { return value }
        }
        return nil
    }
}
