import Foundation
import Sesame
import SesameCommandLine
import SesameDesktop

/// The config file: each input is written as `$XDG_CONFIG_HOME/sesame/config.json` and read by
/// `DesktopConfiguration.resolve`; then every provider's instances and settings are resolved
/// from it, as `sesame` does before it connects a provider.
enum ConfigFileFuzz {
    static let target = FuzzTarget(
        name: "config", summary: "DesktopConfiguration.resolve and each provider's settings from config.json"
    ) { data in
        let file = directory.appendingPathComponent("sesame/config.json")
        require(FileManager.default.createFile(atPath: file.path, contents: data), "cannot write \(file.path)")
        let environment = [
            "XDG_CONFIG_HOME": directory.path, "XDG_STATE_HOME": directory.appendingPathComponent("state").path,
            "HOME": directory.path,
        ]
        guard let configuration = try? DesktopConfiguration.resolve(environment: environment) else { return }
        for plugin in Desktop.providers {
            let instances = [plugin.name] + ((try? plugin.instanceNames(configuration: configuration)) ?? [])
            for instance in instances {
                let request = ProviderConnectionRequest(
                    instance: instance, configuration: configuration, environment: environment,
                    terminal: Terminal(inputIsInteractive: false, errorIsInteractive: false, usesColor: false),
                    transport: NoTransport(), emulators: nil, purpose: .doctor)
                let section =
                    instance == plugin.name
                    ? (try? configuration.section(plugin.name)) ?? [:]
                    : configuration.file[plugin.name]?[instance]?.objectValue ?? [:]
                for setting in plugin.settings(instance: instance) {
                    _ = try? request.value(of: setting, section: section, sectionPath: "\(plugin.name).\(instance)")
                }
            }
        }
    }

    /// A directory of the fuzzing process's own, removed when it exits normally.
    static let directory: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-fuzz-config-\(getpid())")
        try? FileManager.default.createDirectory(
            at: url.appendingPathComponent("sesame"), withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: ConfigFileFuzz.directory) }
        return url
    }()

    /// Sends nothing: resolving settings must not touch the network.
    struct NoTransport: HTTPTransport {
        func send(_ request: HTTPRequest) async throws -> HTTPResponse {
            preconditionFailure("resolving the config file sent a request to \(request.url.absoluteString)")
        }
    }
}

/// The `sesame` command line: the input is the arguments, separated by NUL bytes.
enum CommandLineFuzz {
    static let target = FuzzTarget(name: "command-line", summary: "SesameCLI.parse on NUL-separated arguments") {
        data in
        let arguments = data.split(separator: 0, omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
        do {
            _ = try SesameCLI.parse(arguments)
        } catch let error as UsageError {
            _ = error.description
            _ = SesameCLI.usage(for: error.command)
        } catch {
            preconditionFailure("SesameCLI.parse threw \(type(of: error)), not a UsageError")
        }
    }
}

/// git's credential-helper protocol: the first byte picks the operation (`get`, `store`,
/// `erase`, or one the protocol does not define), the rest is standard input. A `get` is
/// answered from a made-up login; neither a request's nor an answer's description may depend on
/// the password, or show the token.
enum GitCredentialFuzz {
    static let target = FuzzTarget(
        name: "git-credential", summary: "GitCredentialRequest.parse and GitCredential.answer"
    ) { data in
        let operations = ["get", "store", "erase", "fill"]
        let operation = operations[Int(data.first ?? 0) % operations.count]
        let input = String(decoding: data.dropFirst(), as: UTF8.self)
        guard let request = try? GitCredentialRequest.parse(operation: operation, input: input) else { return }
        // The descriptions must not depend on the password: the same with another one.
        func described(_ request: GitCredentialRequest) -> String {
            request.description + String(describing: Mirror(reflecting: request).children.map(\.value))
        }
        if let password = request.password {
            var other = request
            other.password = password + "-other"
            require(described(other) == described(request), "a git credential request's description shows its password")
        }
        _ = request.normalizedHost
        let token = "gho_fuzzTOKEN0123456789abcdef"
        let answer = runBlocking {
            await GitCredential.answer(to: request) { host, username in
                GitCredentialLogin(username: username ?? "octocat", token: token)
            }
        }
        if let answer {
            require(!answer.description.contains(token), "a git credential answer's description shows the token")
            // Bytes, as git reads them: a user name that starts with a combining mark (U+0610, in
            // `url=https://\u{610}octocat@host`) makes `=` and the mark one Character, and
            // `hasPrefix` on the String said no to an answer whose bytes were right.
            require(
                answer.formatted.utf8.starts(with: "username=".utf8),
                "a git credential answer does not start with username=")
        }
    }
}
