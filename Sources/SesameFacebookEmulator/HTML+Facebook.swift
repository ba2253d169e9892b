import Sesame
import SesameEmulator

extension HTML {
    /// The Facebook emulator's page header.
    static let facebookHeader = "facebook <small>Sesame emulator: not the real Facebook</small>"

    /// A whole page under the Facebook emulator's header. `body` must already be escaped HTML.
    static func page(title: String, body: String) -> String {
        page(title: title, body: body, header: facebookHeader)
    }

    /// A page that says something went wrong, as Facebook's dialog does for a bad app id or redirect.
    static func errorPage(title: String, message: String) -> String {
        page(title: title, body: "<h1 class=\"error\">\(escape(title))</h1>\n<p>\(escape(message))</p>")
    }

    /// A consent form: who is logging in, what the app asks for (one checkbox each, all checked;
    /// `public_profile` cannot be unchecked), and Continue and Cancel.
    static func consentForm(
        action: String, hidden: [(String, String)], appName: String, asking: [String], alreadyGranted: [String],
        people: [EmulatedUser], selected: String?, audience: Audience?
    ) -> String {
        var body = "<h1>Log in to \(escape(appName)) with Facebook</h1>\n"
        body += "<form method=\"post\" action=\"\(escape(action))\">\n"
        for (name, value) in hidden {
            body += "<input type=\"hidden\" name=\"\(escape(name))\" value=\"\(escape(value))\">\n"
        }
        if people.count > 1 {
            body += "<p><label for=\"user\">Continue as</label> <select id=\"user\" name=\"user\">\n"
            for person in people {
                let mark = person.id == selected ? " selected" : ""
                let label = person.isTestUser ? "\(person.name) (test user)" : person.name
                body += "<option value=\"\(escape(person.id))\"\(mark)>\(escape(label))</option>\n"
            }
            body += "</select></p>\n"
        } else if let person = people.first {
            body += "<p>Continue as <strong>\(escape(person.name))</strong></p>\n"
            body += "<input type=\"hidden\" name=\"user\" value=\"\(escape(person.id))\">\n"
        }
        let newlyAsked = asking.filter { !alreadyGranted.contains($0) || $0 == "public_profile" }
        if newlyAsked.isEmpty || newlyAsked == ["public_profile"] && alreadyGranted.contains("public_profile") {
            body += "<p>You have already given \(escape(appName)) access to what it asks for.</p>\n"
        } else {
            body += "<p>\(escape(appName)) is requesting access to:</p>\n<ul>\n"
            for name in newlyAsked {
                let words = PermissionCatalogue.descriptions[name] ?? name
                let id = "permission-\(name)"
                if name == "public_profile" {
                    body += "<li><input type=\"checkbox\" id=\"\(escape(id))\" checked disabled> "
                    body += "<label for=\"\(escape(id))\">\(escape(words)) <span class=\"note\">(required)</span>"
                    body += "</label><input type=\"hidden\" name=\"permission\" value=\"public_profile\"></li>\n"
                } else {
                    body += "<li><input type=\"checkbox\" id=\"\(escape(id))\" name=\"permission\" "
                    body += "value=\"\(escape(name))\" checked> <label for=\"\(escape(id))\">\(escape(words)) "
                    body += "<code>\(escape(name))</code></label></li>\n"
                }
            }
            body += "</ul>\n"
            if let audience, newlyAsked.contains(where: PermissionCatalogue.publish.contains) {
                body += "<p class=\"note\">Posts will be visible to: \(escape(audience.description))</p>\n"
            }
        }
        body += "<div class=\"buttons\">\n"
        body += "<button class=\"primary\" type=\"submit\" name=\"action\" value=\"continue\">Continue</button>\n"
        body += "<button type=\"submit\" name=\"action\" value=\"cancel\">Cancel</button>\n"
        body += "</div>\n</form>\n"
        body += "<p class=\"note\">Unchecked permissions are declined; the app is told which.</p>"
        return page(title: "Log in to \(appName)", body: body)
    }
}
