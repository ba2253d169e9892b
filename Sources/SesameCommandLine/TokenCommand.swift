import Foundation
import Sesame
import SesameDesktop

/// What `sesame token` (and the credential helpers, for `--min-valid`) were asked for.
package struct TokenOptions: Sendable, Equatable {
    /// `--json`: one object of the versioned shape ``TokenOptions/jsonVersion``.
    package var json = false
    /// `--min-valid DURATION`: renew first when the token would expire sooner.
    package var minValid: Duration?
    /// `--scopes a,b`: the token must have at least these.
    package var scopes: [String] = []
    /// `--timeout SECONDS`: how long one request to the provider may take.
    package var timeout: Duration?

    package init(json: Bool = false, minValid: Duration? = nil, scopes: [String] = [], timeout: Duration? = nil) {
        self.json = json
        self.minValid = minValid
        self.scopes = scopes
        self.timeout = timeout
    }

    /// The version of the `--json` shape; a field's meaning never changes within one version.
    package static let jsonVersion = 1

    static let minValidOption = OptionSpec(
        "min-valid", value: "DURATION",
        "Renew first if the token would expire within DURATION (90s, 10m, 1h); fail if even a fresh one would.")
    static let options = [
        OptionSpec("json", "Print one JSON object (shape above) instead of the bare token."),
        minValidOption,
        OptionSpec(
            "scopes", value: "a,b", "Fail (77) unless the token has these scopes; on a terminal, log in again for them."
        ),
        OptionSpec("timeout", value: "SECONDS", "How long a request to the provider may take (default 60)."),
    ]

    static let discussion = """
        Renews the login first when the token is due (or would expire within --min-valid). Keep the output
        out of logs. --json prints {"version": 1, "token", "type": "Bearer", "expires_at": RFC 3339 or null,
        "expires_in": whole seconds or null, "scopes": [names], "provider", "issuer": URL or null, "account"};
        fields are only added within a version. Exit 77: not logged in, a login to make again, scopes
        missing (without a terminal); 78: even a fresh token expires within --min-valid; 75: the provider
        did not answer (another process's failed renewal, seconds ago, is reported as it is).
        """

    /// Reads the options of `sesame token` from `parsed`.
    static func parse(_ parsed: ParsedArguments, command: String) throws(UsageError) -> TokenOptions {
        TokenOptions(
            json: parsed.flags.contains("json"), minValid: try minValid(parsed, command: command),
            scopes: (parsed.value("scopes") ?? "").split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces)
            }.filter { !$0.isEmpty },
            timeout: try seconds(parsed, command: command))
    }

    /// `--min-valid`: a whole number with a unit, or several (`90s`, `10m`, `1h30m`), up to 30 days.
    static func minValid(_ parsed: ParsedArguments, command: String) throws(UsageError) -> Duration? {
        guard let text = parsed.value("min-valid") else { return nil }
        let fail = UsageError(
            "--min-valid takes a duration such as 90s, 10m or 1h (whole numbers, units s, m, h); "
                + "'\(text.sanitizedForTerminal)' is not one", command: command)
        var total: Int64 = 0
        var digits = ""
        for character in text {
            if character.isASCII, character.isNumber {
                digits.append(character)
                guard digits.count <= 7 else { throw fail }
                continue
            }
            let unit: Int64
            switch character {
            case "s": unit = 1
            case "m": unit = 60
            case "h": unit = 3600
            default: throw fail
            }
            guard let value = Int64(digits) else { throw fail }
            total += value * unit
            digits = ""
        }
        guard digits.isEmpty, !text.isEmpty, total <= 30 * 86_400 else { throw fail }
        return .seconds(total)
    }

    /// `--timeout SECONDS`: above 0 and up to 600, fractions allowed.
    static func seconds(_ parsed: ParsedArguments, command: String) throws(UsageError) -> Duration? {
        guard let text = parsed.value("timeout") else { return nil }
        guard let seconds = Double(text), seconds.isFinite, seconds > 0, seconds <= 600 else {
            throw UsageError(
                "--timeout must be a number of seconds above 0 and up to 600 (for example 30); "
                    + "'\(text.sanitizedForTerminal)' is not", command: command)
        }
        return .milliseconds(Int64((seconds * 1000).rounded(.up)))
    }
}

extension AccountCommands {
    /// `sesame token`: the token, renewed first when due or when it would expire within
    /// `--min-valid`, with at least `--scopes`; bare or as `--json`, on standard output only.
    func token(
        _ options: TokenOptions, connected: any ConnectedProvider, store: any CredentialStore, key: CredentialKey,
        accounts: AccountState
    ) async throws -> Int32 {
        let started = Date()
        let validFor = options.minValid ?? .zero
        var token = try await validToken(connected, store: store, key: key, accounts: accounts, validFor: validFor)
        var missing = options.scopes.filter { !token.permissions.granted.contains($0) }
        if !missing.isEmpty && context.terminal.inputIsInteractive {
            // Step up: a new login for the scopes kept and those asked for, under the same account;
            // its lines go to standard error, standard output is the token's.
            var login = self
            let union = Array(Set(token.permissions.granted).union(options.scopes)).sorted()
            login.command.action = .login(ProviderCommand.Login(scopes: union))
            login.command.account = key.account
            login.context.io.write = context.io.writeError
            _ = try await login.run()
            token = try await validToken(connected, store: store, key: key, accounts: accounts, validFor: validFor)
            missing = options.scopes.filter { !token.permissions.granted.contains($0) }
        }
        guard missing.isEmpty else {
            throw CommandFailure(
                "The login of account '\(key.account)' to \(connected.label) lacks the scopes "
                    + "\(missing.sorted().joined(separator: ", ").sanitizedForTerminal); log in for them with '\(Desktop.programName) login "
                    + "\(command.provider) --scopes \(Array(Set(token.permissions.granted).union(options.scopes)).sorted().joined(separator: ",").sanitizedForTerminal)'"
                    + (key.account == "default" ? "" : " --account \(key.account)") + " in a terminal.",
                status: ExitStatus.permission)
        }
        try Self.checkLasts(token, options.minValid, since: started, label: connected.label, provider: command.provider)
        // A secret on standard output: that is what `sesame token` is for (as the credential
        // helpers hand theirs to the tool that asked).
        guard options.json else {
            context.io.write(token.tokenString + "\n")
            return ExitStatus.success
        }
        let expiresIn = token.expirationDate.map { JSONValue.int(max(0, Int($0.timeIntervalSinceNow.rounded(.down)))) }
        let object: [String: JSONValue] = [
            "version": .int(TokenOptions.jsonVersion), "token": .string(token.tokenString), "type": .string("Bearer"),
            "expires_at": token.expirationDate.map { .string(KubernetesExecInfo.rfc3339($0)) } ?? .null,
            "expires_in": expiresIn ?? .null, "scopes": .array(token.permissions.granted.sorted().map { .string($0) }),
            "provider": .string(command.provider), "issuer": key.issuer.map { .string($0) } ?? .null,
            "account": .string(key.account),
        ]
        context.io.write(JSONValue.object(object).jsonText + "\n")
        return ExitStatus.success
    }
}

extension AccountCommands {
    /// Fails unless `token` is valid for `minValid` (`--min-valid`) from now: with 78 when it was
    /// renewed since `started` (even a fresh token lives less), with 77 when it could not be renewed.
    static func checkLasts(
        _ token: AccessToken, _ minValid: Duration?, since started: Date, label: String, provider: String,
        expiry: Date? = nil
    ) throws {
        guard let minValid, let expiry = expiry ?? token.expirationDate,
            expiry.timeIntervalSinceNow < minValid.inSeconds
        else { return }
        let left = max(0, Int(expiry.timeIntervalSinceNow.rounded(.down)))
        // Renewed by this command (or moments before by another): the provider gives no longer.
        guard token.refreshDate < started.addingTimeInterval(-5) else {
            throw CommandFailure(
                "Even a fresh token of \(label) expires in \(left) s, within --min-valid "
                    + "\(minValid.formattedSeconds); ask for less (the provider sets how long its tokens live).",
                status: ExitStatus.config)
        }
        throw CommandFailure(
            "The token of \(label) expires in \(left) s, within --min-valid \(minValid.formattedSeconds), and the "
                + "login cannot be renewed; log in again with '\(Desktop.programName) login \(provider)'.",
            status: ExitStatus.permission)
    }
}
