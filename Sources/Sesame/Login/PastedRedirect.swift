import Foundation

/// Where a login with no local browser reads what the person pastes: the address their browser
/// ended on, on another machine. A terminal in `SesameDesktop`; a list of lines in tests.
public protocol RedirectPasteSource: Sendable {
    /// Shows `prompt` and returns the next line the person entered, without its line end.
    ///
    /// - Returns: `nil` when the person ended the input (Ctrl-D, Ctrl-C) or it ended; the login
    ///   is then cancelled. When the task is cancelled (the redirect came another way), it returns
    ///   promptly, with `nil`.
    func nextPaste(prompt: String) async -> String?
}

/// The paste-the-redirect login, for a person whose browser is on another machine (an SSH
/// session, a server, a container): the authorization URL is printed, the person signs in
/// anywhere, the browser's final redirect to `http://127.0.0.1:PORT/callback` fails there, and the
/// person pastes that address back.
///
/// What is pasted goes through the same check as a redirect the loopback receiver gets
/// (``OAuth/parseRedirectParameters(_:expectedState:expectedIssuer:provider:)``): the `state`
/// must be this login's and the `iss` the provider's, before the code is used. The receiver in
/// `SesameHTTPServer` still listens on the redirect address, so a browser on the same machine
/// finishes the login too; whichever answer comes first wins.
///
/// What may be pasted (``parse(_:redirectURI:expectedState:expectedIssuer:provider:)``):
/// - the whole address (`http://127.0.0.1:PORT/callback?code=…&state=…`), with any extra
///   parameters; its host must be a loopback name and its port and path the redirect URI's, so
///   that another address pasted by mistake (the sign-in page's own) is named as such;
/// - only its query (`code=…&state=…`, with or without the `?`);
/// - only the code, as gcloud and rclone accept: the `state` cannot be checked then, which is
///   safe with PKCE. The state ties a redirect to the login that asked for it, so that nobody
///   can make the app finish a login with a code of their choosing (CSRF). A code is exchanged
///   here with this login's PKCE verifier, which never left the process, and the provider
///   refuses a code issued for another login's challenge; the only codes that work are those
///   issued to whoever opened this login's own authorization URL, which carries the state
///   anyway. A provider that promises an `iss` in its redirects (RFC 9207) needs the whole
///   address, so that the issuer check is not skipped.
///
/// A line that is none of these, or has the wrong `state`, is refused with a message saying why
/// and the person may paste again, up to ``maximumAttempts`` times in all.
public enum PastedRedirect {
    /// How many pastes a login reads before it fails with the last refusal.
    public static let maximumAttempts = 5

    /// What the person is asked first, naming the address their browser will end on.
    public static func prompt(redirectURI: URL) -> String {
        "After you sign in, the browser goes to \(redirectURI.absoluteString)?... If it says it cannot reach that "
            + "page (the browser is on another machine), copy that whole address from its address bar and paste it "
            + "here.\nPaste the address, then press Enter (Ctrl-C cancels): "
    }

    /// Reads pastes from `source` until one is this login's redirect, telling the person why each
    /// refused one was refused.
    ///
    /// - Returns: what the redirect carried: a code, or the provider's error answer.
    /// - Throws: ``AuthError/loginCancelled(provider:)`` when the input ends (the person pressed
    ///   Ctrl-D or Ctrl-C); the last refusal after ``maximumAttempts`` refused pastes;
    ///   `CancellationError` when the task is cancelled.
    public static func receive(
        from source: any RedirectPasteSource, redirectURI: URL, expectedState: String,
        expectedIssuer: AuthorizationResponseIssuer?, provider: ProviderID?, attempts: Int = maximumAttempts
    ) async throws -> RedirectOutcome {
        var prompt = Self.prompt(redirectURI: redirectURI)
        var attempt = 0
        while true {
            let line = await source.nextPaste(prompt: prompt)
            try Task.checkCancellation()
            guard let line else { throw AuthError.loginCancelled(provider: provider) }
            attempt += 1
            do {
                return try parse(
                    line, redirectURI: redirectURI, expectedState: expectedState, expectedIssuer: expectedIssuer,
                    provider: provider)
            } catch let refusal as AuthError {
                guard attempt < attempts else { throw refusal }
                let left = attempts - attempt
                // The shared messages end by sending the person back to the start; here they may
                // simply paste again.
                let reason = refusal.message.replacingOccurrences(of: " Start the login again.", with: "")
                prompt =
                    "\(reason)\nPaste the address again (\(left) \(left == 1 ? "try" : "tries") left; "
                    + "Ctrl-C cancels): "
            }
        }
    }

    /// Reads one pasted line: the whole redirect address, its query, or only the code.
    ///
    /// - Throws: ``AuthError`` that says what is wrong with it: not an address or a code
    ///   (``AuthError/unreadablePaste(_:provider:)``), an address other than the redirect's
    ///   (``AuthError/pastedAddressElsewhere(_:redirectURI:provider:)``), a missing or wrong
    ///   `state` (``AuthError/stateMismatch(provider:missing:)``), a wrong `iss`
    ///   (``AuthError/issuerMismatch(expected:received:provider:)``), neither a code nor an error,
    ///   a `code`, `state`, `error` or `iss` given twice.
    public static func parse(
        _ line: String, redirectURI: URL, expectedState: String, expectedIssuer: AuthorizationResponseIssuer?,
        provider: ProviderID?
    ) throws -> RedirectOutcome {
        let text = line.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw AuthError.unreadablePaste("the line was empty", provider: provider) }
        guard text.utf8.count <= 16 * 1024 else {
            throw AuthError.unreadablePaste("the line is too long to be a sign-in address", provider: provider)
        }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7F }) else {
            throw AuthError.unreadablePaste("it has spaces or control characters inside", provider: provider)
        }
        let parameters: [(String, String)]
        if text.contains("://") {
            guard let components = URLComponents(string: text), let host = components.host else {
                throw AuthError.unreadablePaste("it is not a web address that can be read", provider: provider)
            }
            let scheme = components.scheme?.lowercased()
            guard scheme == "http" || scheme == "https", EndpointSecurity.isLoopback(host),
                components.port == redirectURI.port, components.path == redirectURI.path
            else {
                var elsewhere = components
                elsewhere.query = nil
                elsewhere.fragment = nil
                throw AuthError.pastedAddressElsewhere(
                    elsewhere.string ?? host, redirectURI: redirectURI, provider: provider)
            }
            // As the receiver reads it: the query, or for implicit-style providers the fragment.
            let query = FormEncoding.decode(components.percentEncodedQuery ?? "")
            parameters = query.isEmpty ? FormEncoding.decode(components.percentEncodedFragment ?? "") : query
        } else if text.contains("=") {
            parameters = FormEncoding.decode(text.hasPrefix("?") ? String(text.dropFirst()) : text)
        } else {
            guard text.unicodeScalars.allSatisfy({ codeCharacters.contains($0) }), text.count >= 8 else {
                throw AuthError.unreadablePaste("it is neither a web address nor a sign-in code", provider: provider)
            }
            if let expectedIssuer, expectedIssuer.required {
                throw AuthError.unreadablePaste(
                    "only a code was pasted, and this provider names itself in the address (its 'iss'), which must be "
                        + "checked; paste the whole address from \(expectedIssuer.issuer)", provider: provider)
            }
            return .code(text)
        }
        guard parameters.contains(where: { $0.0 == "code" || $0.0 == "error" || $0.0 == "state" }) else {
            throw AuthError.unreadablePaste(
                "it carries no sign-in answer (no 'code', 'error' or 'state')", provider: provider)
        }
        return try OAuth.parseRedirectParameters(
            parameters, expectedState: expectedState, expectedIssuer: expectedIssuer, provider: provider)
    }

    /// The characters an authorization code is made of in practice: RFC 3986's unreserved ones
    /// and the few others providers use (`/` and `+` in base64 codes, `=`, `!`, `*`).
    private static let codeCharacters = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/+!*")
}

extension AuthError {
    /// The person cancelled a login at the terminal (Ctrl-C, or the input ended).
    public static func loginCancelled(provider: ProviderID? = nil) -> AuthError {
        AuthError(
            category: .userCancelled,
            message: "The sign-in was cancelled at the terminal; nothing was stored.",
            loginFailedReason: .userCancelled,
            recoveryTactic: RecoveryTactic.none,
            provider: provider
        )
    }

    /// What was pasted for a login is not a sign-in address or code.
    public static func unreadablePaste(_ why: String, provider: ProviderID? = nil) -> AuthError {
        AuthError(
            category: .invalid,
            message: "That is not the sign-in address: \(why). Paste the whole address the browser ended on "
                + "(starting with http://127.0.0.1).",
            loginFailedReason: .malformedRedirect,
            recoveryTactic: RecoveryTactic.none,
            provider: provider
        )
    }

    /// A pasted address goes somewhere other than the login's redirect URI (the sign-in page's own
    /// address, say).
    public static func pastedAddressElsewhere(
        _ address: String, redirectURI: URL, provider: ProviderID? = nil
    ) -> AuthError {
        AuthError(
            category: .invalid,
            message: "That address goes to \(address), not to this sign-in's redirect "
                + "address \(redirectURI.absoluteString). Paste the address the browser ended on after you signed "
                + "in, the one starting with \(redirectURI.absoluteString)?",
            loginFailedReason: .malformedRedirect,
            recoveryTactic: RecoveryTactic.none,
            provider: provider
        )
    }
}
