import Foundation
import Sesame
import SesameDesktop

/// Which of a login's tokens `sesame kubectl-credential` hands to kubectl.
package enum KubeTokenKind: String, Sendable, Equatable, CaseIterable {
    /// The OpenID ID token when the login has one, else the access token.
    case automatic = "auto"
    /// The OpenID ID token; a login without one is an error.
    case id
    /// The access token (an API server that takes the provider's access tokens).
    case access
}

/// What `sesame kubectl-credential` was asked for.
package struct KubectlCredentialOptions: Sendable, Equatable {
    /// `--token-type`.
    package var tokenKind: KubeTokenKind = .automatic
    /// `--min-valid`: renew first when the token handed on would expire within it.
    package var minValid: Duration?
}

/// What kubectl tells an exec credential plug-in in `KUBERNETES_EXEC_INFO`: the
/// `ExecCredential` version it reads back, and whether a person can answer on the terminal.
package struct KubernetesExecInfo: Sendable, Equatable {
    /// `client.authentication.k8s.io/v1beta1` or `client.authentication.k8s.io/v1`.
    package var apiVersion: String
    /// `spec.interactive`: kubectl handed its standard input over and a person may answer.
    package var interactive: Bool

    /// The versions of `ExecCredential` Sesame answers.
    package static let apiVersions = ["client.authentication.k8s.io/v1beta1", "client.authentication.k8s.io/v1"]
    /// The most a `KUBERNETES_EXEC_INFO` may hold; kubectl sends a few hundred bytes (a few
    /// thousand with `provideClusterInfo`, which carries the cluster's CA).
    package static let maximumSize = 64 * 1024

    /// Reads `KUBERNETES_EXEC_INFO`. Without it (an older kubectl, or run by hand), the answer is
    /// `v1beta1` and interactive when standard input is a terminal.
    ///
    /// - Throws: ``CommandFailure`` (65) for a value that is not an `ExecCredential` of a version
    ///   Sesame answers.
    package static func read(_ text: String?, inputIsTerminal: Bool) throws -> KubernetesExecInfo {
        guard let text, !text.isEmpty else {
            return KubernetesExecInfo(apiVersion: apiVersions[0], interactive: inputIsTerminal)
        }
        guard text.utf8.count <= maximumSize, let json = JSONValue(parsing: Data(text.utf8)), json.objectValue != nil
        else {
            throw CommandFailure(
                "KUBERNETES_EXEC_INFO is not an ExecCredential in JSON; kubectl sets it, so unset it when running "
                    + "'\(Desktop.programName) kubectl-credential' by hand.", status: ExitStatus.dataError)
        }
        guard let version = json["apiVersion"]?.stringValue, apiVersions.contains(version) else {
            throw CommandFailure(
                "KUBERNETES_EXEC_INFO asks for an ExecCredential version Sesame does not answer; set apiVersion in "
                    + "the kubeconfig's exec section to one of \(apiVersions.joined(separator: ", ")).",
                status: ExitStatus.dataError)
        }
        let interactive = json["spec"]?["interactive"]?.boolValue ?? inputIsTerminal
        return KubernetesExecInfo(apiVersion: version, interactive: interactive)
    }

    /// The `ExecCredential` carrying `token`, valid until `expiry`, as kubectl reads it.
    package func credential(token: String, expiry: Date?) -> String {
        var status: [String: JSONValue] = ["token": .string(token)]
        if let expiry { status["expirationTimestamp"] = .string(Self.rfc3339(expiry)) }
        return JSONValue.object([
            "kind": .string("ExecCredential"), "apiVersion": .string(apiVersion), "spec": .object([:]),
            "status": .object(status),
        ]).jsonText + "\n"
    }

    /// RFC 3339 in UTC, whole seconds, as Kubernetes writes times (`2026-01-02T03:04:05Z`).
    package static func rfc3339(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down)))
    }
}

/// The expiry a JSON Web Token states (`exp`), read without checking it: the token came from
/// the store, where its provider checked it at login or renewal.
package func jwtExpiry(_ token: String) -> Date? {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3 else { return nil }
    var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
    guard let data = Data(base64Encoded: base64), let exp = JSONValue(parsing: data)?["exp"]?.doubleValue else {
        return nil
    }
    return Date(timeIntervalSince1970: exp)
}

extension AccountCommands {
    /// `sesame kubectl-credential`: the stored login's token as an `ExecCredential` on standard
    /// output, renewed first when due; a login to make again is made on the terminal when kubectl
    /// says a person is there, and refused with 77 otherwise.
    func kubectlCredential(
        _ options: KubectlCredentialOptions, connected: any ConnectedProvider, store: any CredentialStore,
        key: CredentialKey, accounts: AccountState
    ) async throws -> Int32 {
        let info = try KubernetesExecInfo.read(
            context.environment["KUBERNETES_EXEC_INFO"], inputIsTerminal: context.terminal.inputIsInteractive)
        // The ID token kubectl gets may expire before the access token is due (Entra's do): the
        // login is renewed when the token handed on is due.
        var handedExpiry: (@Sendable (AccessToken) -> Date?)?
        if options.tokenKind != .access {
            handedExpiry = { @Sendable (token: AccessToken) -> Date? in token.idToken.flatMap { jwtExpiry($0) } }
        }
        var token: AccessToken
        let started = Date()
        do {
            token = try await validToken(
                connected, store: store, key: key, accounts: accounts, handedExpiry: handedExpiry,
                validFor: options.minValid ?? .zero)
        } catch  where Self.needsLogin(error) {
            guard info.interactive, context.terminal.inputIsInteractive else {
                let failure = CommandFailure.from(error, provider: command.provider)
                throw CommandFailure(
                    "\(failure.message) (kubectl ran this without a terminal, so Sesame cannot log in here: do "
                        + "that in a terminal, then retry.)", status: ExitStatus.permission)
            }
            // The login's own lines go to standard error: standard output is kubectl's.
            var login = self
            login.command.action = .login(ProviderCommand.Login())
            login.command.account = key.account
            login.context.io.write = context.io.writeError
            _ = try await login.run()
            token = try await validToken(
                connected, store: store, key: key, accounts: accounts, handedExpiry: handedExpiry,
                validFor: options.minValid ?? .zero)
        }
        let handed: String
        var expiry = token.expirationDate
        switch (options.tokenKind, token.idToken) {
        case (.access, _), (.automatic, nil):
            handed = token.tokenString
        case (.id, nil):
            throw CommandFailure(
                "The login to \(connected.label) has no ID token (the provider gives none, or it was made without "
                    + "the openid scope); use --token-type access, or log in again with --scopes openid.",
                status: ExitStatus.permission)
        case (_, let idToken?):
            handed = idToken
            if let idExpiry = jwtExpiry(idToken) { expiry = min(expiry ?? idExpiry, idExpiry) }
        }
        if let expiry, expiry <= Date() {
            throw CommandFailure(
                "The ID token of the login to \(connected.label) has expired and the provider gave no new one when "
                    + "renewing; log in again with '\(Desktop.programName) login \(command.provider)'.",
                status: ExitStatus.permission)
        }
        try Self.checkLasts(
            token, options.minValid, since: started, label: connected.label, provider: command.provider, expiry: expiry)
        // The token goes to kubectl, on standard output, and nowhere else.
        context.io.write(info.credential(token: handed, expiry: expiry))
        return ExitStatus.success
    }

    /// Whether `error` means the person has to log in again (none stored, or the provider ended it).
    static func needsLogin(_ error: any Error) -> Bool {
        if let failure = error as? CommandFailure { return failure.status == ExitStatus.permission }
        if let error = error as? AuthError { return error.category == .authenticationReopenSession }
        return false
    }
}

/// `sesame kubeconfig PROVIDER`: the kubeconfig `users:` entry that runs this program as kubectl's
/// exec credential plug-in.
package struct KubeconfigCommand: Sendable, Equatable {
    /// The provider's name.
    package var provider: String
    /// `--account NAME`.
    package var account: String?
    /// `--token-type`, passed on when not the default.
    package var tokenKind: KubeTokenKind = .automatic

    /// Prints the entry, once the provider's name is known to the configuration (a plug-in's, or
    /// an instance the config file gives or a login made).
    func run(context: CommandContext) throws -> Int32 {
        let configuration = try DesktopConfiguration.resolve(environment: context.environment)
        guard try Desktop.plugin(named: provider, configuration: configuration) != nil else {
            let known = try Desktop.names(configuration: configuration).map(\.name)
            throw CommandFailure(
                "unknown provider '\(provider.sanitizedForTerminal)'; known providers: \(known.joined(separator: ", ")).",
                status: ExitStatus.usage)
        }
        context.io.write(entry(program: Self.programPath))
        return ExitStatus.success
    }

    /// The YAML to paste under `users:` (the entry and its exec section), for `program` (this
    /// program's absolute path).
    package func entry(program: String) -> String {
        var arguments = ["kubectl-credential", provider]
        if let account { arguments += ["--account", account] }
        if tokenKind != .automatic { arguments += ["--token-type", tokenKind.rawValue] }
        let name = "\(Desktop.programName)-\(provider)" + (account.map { "-\($0)" } ?? "")
        return """
            users:
            - name: \(Self.quoted(name))
              user:
                exec:
                  apiVersion: \(KubernetesExecInfo.apiVersions[0])
                  command: \(Self.quoted(program))
                  args:
            \(arguments.map { "      - \(Self.quoted($0))" }.joined(separator: "\n"))
                  interactiveMode: IfAvailable
                  provideClusterInfo: false

            """
    }

    /// A YAML scalar: plain when it is safe, else double-quoted (JSON's escapes are YAML's).
    static func quoted(_ text: String) -> String {
        let plain = text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_./@".contains($0)) }
        return plain && !text.isEmpty && !text.hasPrefix("-") ? text : JSONValue.string(text).jsonText
    }

    /// This program's absolute path (`/proc/self/exe`), or its name when that cannot be read.
    package static var programPath: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? Desktop.programName
    }

    static let tokenTypeOption = OptionSpec(
        "token-type", value: "KIND",
        "Which token kubectl gets: auto (the ID token when the login has one, else the access token), id or access.")

    static func tokenKind(_ parsed: ParsedArguments, command: String) throws(UsageError) -> KubeTokenKind {
        guard let text = parsed.value("token-type") else { return .automatic }
        guard let kind = KubeTokenKind(rawValue: text) else {
            throw UsageError(
                "--token-type must be auto, id or access; '\(text.sanitizedForTerminal)' is not", command: command)
        }
        return kind
    }

    static let credentialDefinition = CommandDefinition(
        name: "kubectl-credential",
        spec: CommandSpec(
            name: "kubectl-credential", summary: "Print an ExecCredential for kubectl (its exec credential plug-in).",
            synopses: ["PROVIDER [--account NAME] [--token-type KIND] [--min-valid DURATION] [--storage MODE]"],
            discussion: """
                kubectl runs it from the kubeconfig's exec section ('\(Desktop.programName) kubeconfig PROVIDER' prints one). It \
                prints the stored login's ID token (or its access token) with its expiry as an ExecCredential \
                of the version KUBERNETES_EXEC_INFO asks for (client.authentication.k8s.io/v1beta1 when unset), \
                renewing the login first when the token handed out is due (an ID token may expire before the \
                access token does). A login to make again is made on the terminal when kubectl says a \
                person is there; otherwise it exits 77 saying what to run.
                """,
            options: [accountOption, tokenTypeOption, TokenOptions.minValidOption, storageOption],
            examples: [
                (
                    "KUBERNETES_EXEC_INFO= \(Desktop.programName) kubectl-credential \(Desktop.providers[0].name)",
                    "See what kubectl gets (the output holds the token)"
                )
            ])
    ) { parsed throws(UsageError) in
        try providerCommand(parsed, command: "kubectl-credential") { _ throws(UsageError) in
            .kubectlCredential(
                KubectlCredentialOptions(
                    tokenKind: try tokenKind(parsed, command: "kubectl-credential"),
                    minValid: try TokenOptions.minValid(parsed, command: "kubectl-credential")))
        }
    }

    static let definition = CommandDefinition(
        name: "kubeconfig",
        spec: CommandSpec(
            name: "kubeconfig", summary: "Print the kubeconfig user entry that gets kubectl's token from Sesame.",
            synopses: ["PROVIDER [--account NAME] [--token-type KIND]"],
            discussion: """
                Paste it under 'users:' in ~/.kube/config and name it in a context's 'user:'. kubectl then \
                runs '\(Desktop.programName) kubectl-credential' (by this program's full path) whenever it needs a token.
                """,
            options: [accountOption, tokenTypeOption],
            examples: [
                (
                    "\(Desktop.programName) kubeconfig \(Desktop.providers[0].name) --account work",
                    "The entry for the account 'work'"
                )
            ])
    ) { parsed throws(UsageError) in
        let provider = try ProviderTable.provider(in: parsed, command: "kubeconfig")
        try noExtra(parsed, after: 1, command: "kubeconfig")
        return .kubeconfig(
            KubeconfigCommand(
                provider: provider, account: try parsed.account(command: "kubeconfig"),
                tokenKind: try tokenKind(parsed, command: "kubeconfig")))
    }
}
