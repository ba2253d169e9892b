import Foundation
import Sesame
import SesameDesktop
import SesameFacebook

/// A Facebook session as the generic commands use it.
struct FacebookAccountSession: ProviderAccountSession {
    var session: FacebookSession

    var providerSession: FacebookSession { session }
    var lastUsage: JSONValue? { session.governor.lastUsage?.json }

    func logOut(revoke: Bool) async throws -> String? {
        try await RevocationFailed.loggingOut(
            revoke: revoke, advice: "remove the app in Facebook's settings (Apps and Websites)"
        ) {
            try await session.logout(revoke: revoke)
        }
        return revoke ? "the app's access was revoked" : nil
    }

    func listPermissions() async throws -> PermissionSet { try await session.refreshPermissions() }

    func requestPermissions(_ names: [String], options: [String: String]) async throws -> PermissionRequestOutcome {
        let audience: DefaultAudience =
            switch options["audience"] {
            case "everyone": .everyone
            case "only-me": .onlyMe
            default: .friends
            }
        let publish = names.filter(Self.isPublish)
        let read = names.filter { !Self.isPublish($0) }
        var outcome = PermissionRequestOutcome(granted: [], declined: [])
        if !read.isEmpty {
            outcome = try await session.requestNewReadPermissions(read)
        }
        if !publish.isEmpty {
            let got = try await session.requestNewPublishPermissions(publish, defaultAudience: audience)
            outcome = PermissionRequestOutcome(
                granted: outcome.granted.union(got.granted), declined: outcome.declined.union(got.declined))
        }
        return outcome
    }

    func revokePermission(_ name: String) async throws { try await session.revokePermission(name) }

    /// Facebook's publish permissions: `publish_*`, `manage_*`, `pages_manage_*`, `ads_management`.
    static func isPublish(_ name: String) -> Bool {
        name.hasPrefix("publish_") || name.hasPrefix("manage_") || name.hasPrefix("pages_manage_")
            || name == "ads_management" || name == "rsvp_event"
    }
}
