import Foundation
import Sesame
import SesameEmulator

extension GitHubEmulator {
    /// The tokens and refresh tokens the emulator has issued, as JSON, so that an emulator
    /// started again (the `sesame` command starts one per run) still accepts them. The data
    /// holds tokens: keep it in a file only its owner can read.
    public func stateData() -> Data {
        let state = engine.locked { state in
            SavedState(
                tokens: state.tokens.mapValues {
                    SavedToken(
                        login: $0.login, scopes: $0.scopes, expiresAt: $0.expiresAt, clientID: $0.clientID,
                        isPersonal: $0.isPersonal, family: $0.family)
                },
                refreshTokens: state.refreshTokens.mapValues {
                    SavedRefresh(
                        login: $0.login, scopes: $0.scopes, clientID: $0.clientID, expiresAt: $0.expiresAt,
                        family: $0.family)
                })
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .secondsSince1970
        return (try? encoder.encode(state)) ?? Data("{}".utf8)
    }

    /// Whether the emulator holds any access or refresh token.
    public var hasIssuedTokens: Bool { engine.locked { !$0.tokens.isEmpty || !$0.refreshTokens.isEmpty } }

    /// Takes back tokens saved by ``stateData()``; tokens it already has are kept, and refresh
    /// tokens it rotated away, and tokens of a family it revoked, are not taken back.
    ///
    /// - Throws: `EmulatorError` when `data` is not what ``stateData()`` writes.
    public func restoreState(from data: Data) throws {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        let saved: SavedState
        do {
            saved = try decoder.decode(SavedState.self, from: data)
        } catch {
            throw EmulatorError(message: "The GitHub emulator's saved state cannot be read (\(error)).")
        }
        engine.locked { state in
            for (token, value) in saved.tokens where state.tokens[token] == nil {
                if let family = value.family, state.families.isRevoked(family) { continue }
                state.tokens[token] = GitHubEngine.Token(
                    login: value.login, scopes: value.scopes, expiresAt: value.expiresAt, clientID: value.clientID,
                    isPersonal: value.isPersonal, family: value.family)
            }
            for (token, value) in saved.refreshTokens where state.refreshTokens[token] == nil {
                if state.families.family(ofUsed: token) != nil { continue }
                if let family = value.family, state.families.isRevoked(family) { continue }
                // A refresh token saved before families were kept starts a family of its own.
                state.refreshTokens[token] = GitHubEngine.Refresh(
                    login: value.login, scopes: value.scopes, clientID: value.clientID, expiresAt: value.expiresAt,
                    family: value.family ?? GitHubEngine.random(12))
            }
        }
    }
}

private struct SavedState: Codable {
    var tokens: [String: SavedToken]
    var refreshTokens: [String: SavedRefresh]
}

private struct SavedToken: Codable {
    var login: String
    var scopes: [String]?
    var expiresAt: Date?
    var clientID: String?
    var isPersonal: Bool
    /// Absent in files written before token families were kept.
    var family: String?
}

private struct SavedRefresh: Codable {
    var login: String
    var scopes: [String]
    var clientID: String
    var expiresAt: Date
    /// Absent in files written before token families were kept.
    var family: String?
}
