import Foundation
import Sesame
import SesameCurl
import SesameDesktop

/// `sesame git-credential get|store|erase`: git's credential helper, answered from the stored
/// logins of the providers whose logins are git credentials (see
/// `ProviderPlugin.connect(_:credentialHost:)`).
package struct GitCredentialCommand: Sendable, Equatable {
    /// What git asks (`get`, `store`, `erase`, or an operation the protocol may add later, which
    /// is ignored).
    package var operation: String
    /// `--storage MODE`.
    package var storage: StorageMode?
    /// `--forget-refused`: `erase` removes the stored login whose token git says was refused.
    package var forgetRefused = false
    /// `--min-valid`: renew first when the token would expire within it.
    package var minValid: Duration?

    static let definition = CommandDefinition(
        name: "git-credential",
        spec: CommandSpec(
            name: "git-credential",
            summary: "Answer git's credential questions from the stored logins (git's credential helper).",
            synopses: ["[--forget-refused] [--min-valid DURATION] [--storage MODE] get|store|erase"],
            discussion: """
                git runs it with the request on standard input (key=value lines, a blank line ends them). \
                'get' answers username=<login> and password=<token> for a host Sesame has a login for (the \
                active account, or the one git names with username=), refreshing a token that is about to \
                expire; for any other host it prints nothing and exits 0, so git asks the next helper. It never \
                prompts and prints the token to git only. 'store' does nothing (logins come from '\(Desktop.programName) login'); \
                'erase' forgets nothing, unless --forget-refused is given: then the stored login whose token git \
                reports as refused is removed.
                """,
            options: [
                OptionSpec(
                    "forget-refused", "With 'erase': remove the stored login whose token git says was refused."),
                TokenOptions.minValidOption, storageOption,
            ],
            examples: [
                (
                    "git config --global credential.https://HOST.helper '!\(Desktop.programName) git-credential'",
                    "Let git use the stored login of a provider that serves git at HOST"
                )
            ])
    ) { parsed throws(UsageError) in
        guard let operation = parsed.positionals.first else {
            throw UsageError("name the operation git asks for: get, store or erase", command: "git-credential")
        }
        try noExtra(parsed, after: 1, command: "git-credential")
        return .gitCredential(
            GitCredentialCommand(
                operation: operation, storage: try storageMode(parsed, command: "git-credential"),
                forgetRefused: parsed.flags.contains("forget-refused"),
                minValid: try TokenOptions.minValid(parsed, command: "git-credential")))
    }

    func run(context: CommandContext) async throws -> Int32 {
        let input = await context.io.readStandardInput(GitCredentialRequest.maximumInputSize)
        guard input.count <= GitCredentialRequest.maximumInputSize else {
            throw CommandFailure(
                "the request from git is larger than \(GitCredentialRequest.maximumInputSize / 1024) KiB; git sends "
                    + "a few key=value lines.", status: ExitStatus.dataError)
        }
        let request: GitCredentialRequest?
        do {
            request = try GitCredentialRequest.parse(
                operation: operation, input: String(decoding: input, as: UTF8.self))
        } catch {
            throw CommandFailure(error.description, status: ExitStatus.dataError)
        }
        // An operation the protocol does not define, and `store`: nothing to do.
        guard let request, request.operation != .store, let host = request.normalizedHost else {
            return ExitStatus.success
        }
        if request.operation == .erase && !forgetRefused { return ExitStatus.success }
        let configuration = try DesktopConfiguration.resolve(
            overrides: .init(storage: storage), environment: context.environment)
        let storage = try await DesktopStorage.select(
            configuration.storage, keyring: context.keyring, environment: context.environment)
        for plugin in Desktop.providers {
            let network = try NetworkSettings.resolve(
                instance: plugin.name, plugin: plugin, configuration: configuration, environment: context.environment)
            guard
                let connected = try await plugin.connect(
                    ProviderConnectionRequest(
                        instance: plugin.name, configuration: configuration, environment: context.environment,
                        terminal: context.terminal,
                        transport: LazyTransport.curl { network.transportConfiguration() }, emulators: nil,
                        purpose: .use),
                    credentialHost: host)
            else { continue }
            let answer: GitCredentialAnswer?
            do {
                // Behind another process's renewal, git waits one request timeout and a margin at most.
                answer = try await RefreshLock.$waitLimit.withValue(AccountCommands.requestTimeout + .seconds(5)) {
                    try await self.answer(request, connected: connected, store: storage.store, context: context)
                }
                await connected.shutdown()
            } catch {
                await connected.shutdown()
                throw error
            }
            if let answer {
                // The token goes to git, on standard output, and nowhere else.
                context.io.write(answer.formatted)
                return ExitStatus.success
            }
        }
        return ExitStatus.success
    }

    /// The answer of one provider: for `get`, its stored login of the host; for `erase`, nothing
    /// (after forgetting the refused login when asked to).
    private func answer(
        _ request: GitCredentialRequest, connected: any ConnectedProvider, store: any CredentialStore,
        context: CommandContext
    ) async throws -> GitCredentialAnswer? {
        if request.operation == .erase {
            try await forget(request, connected: connected, store: store, context: context)
            return nil
        }
        let accounts = AccountState(environment: context.environment)
        return try await GitCredential.answer(to: request) { host, username in
            guard
                let stored = try await GitCredential.storedLogin(
                    in: store, provider: connected.providerID, host: connected.appID, username: username,
                    preferredAccount: await accounts.activeAccount(for: connected.providerID, appID: connected.appID))
            else { return nil }
            // Through the session, so that an expiring token is refreshed (and saved) first.
            let session = connected.session(account: stored.key.account, store: store)
            guard try await session.open() else { return nil }
            let started = Date()
            let token = try await session.validToken(handedExpiry: nil, validFor: minValid ?? .zero)
            try AccountCommands.checkLasts(
                token, minValid, since: started, label: connected.label, provider: connected.providerID.rawValue)
            return GitCredentialLogin(StoredCredential(key: stored.key, token: token, savedAt: stored.savedAt))
        }
    }

    /// Removes the stored login of `request`'s host whose token is the password git says was
    /// refused; `true` when one was removed.
    @discardableResult
    private func forget(
        _ request: GitCredentialRequest, connected: any ConnectedProvider, store: any CredentialStore,
        context: CommandContext
    ) async throws -> Bool {
        guard let password = request.password, !password.isEmpty else { return false }
        let refused = try await store.list(provider: connected.providerID).filter {
            $0.key.appID == connected.appID && $0.token.tokenString == password
        }
        for stored in refused { try await store.delete(stored.key) }
        if let first = refused.first {
            context.io.writeError(
                "\(Desktop.programName) git-credential: removed the login of account '\(first.key.account.sanitizedForTerminal)' "
                    + "on \(connected.appID.sanitizedForTerminal), which git reports as refused.\n")
        }
        return !refused.isEmpty
    }
}
