import Foundation
import Sesame
import SesameKeyring
import SesameTestSupport

// sesame-keyring-probe: makes one keyring call in a process of its own and prints the outcome
// as one line of JSON. The keyring tests run it with a D-Bus environment of their choosing
// (a dead bus, a bus without a Secret Service, a silent socket, a locked keyring), because
// libsecret keeps one bus connection per process.
//
//   sesame-keyring-probe [--timeout-ms N] [--no-prompt] <command> ...
//
//   load <provider> <app> <account>      status
//   save <provider> <app> <account>      resolve <policy> <file>
//   delete <provider> <app> <account>    list [<provider>]
//   load-token <provider> <app> <account>
//       load, with the token read in the output (a test's own value)
//
// Prints {"ok":true,...} and exits 0, or {"ok":false,"kind":...,"message":...} and exits 1.
// Never prints a token.

typealias Output = KeyringProbeOutput

func emit(_ output: Output, exitCode: Int32) -> Never {
    StandardStreams.write(encoded(output), to: 1)
    exit(exitCode)
}

/// `output` as one line of JSON. In a function of its own so that nothing it makes is still
/// alive when `emit` exits: LeakSanitizer cannot follow the pointer inside a live `Data`.
func encoded(_ output: Output) -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    var data = (try? encoder.encode(output)) ?? Data("{\"ok\":false}".utf8)
    data.append(0x0A)
    return Array(data)
}

func usage() -> Never {
    StandardStreams.err("usage: sesame-keyring-probe [--timeout-ms N] [--no-prompt] <command> ...\n")
    exit(64)
}

var arguments = Array(CommandLine.arguments.dropFirst())
var timeout = Duration.seconds(3)
var unlocking = SecretServiceStore.Unlocking.prompt(timeout: .seconds(10))
while let first = arguments.first, first.hasPrefix("--") {
    arguments.removeFirst()
    switch first {
    case "--timeout-ms":
        guard let value = arguments.first.flatMap(Int.init) else { usage() }
        arguments.removeFirst()
        timeout = .milliseconds(value)
    case "--no-prompt":
        unlocking = .never
    default:
        usage()
    }
}
guard let command = arguments.first else { usage() }
let rest = Array(arguments.dropFirst())
let store = SecretServiceStore(timeout: timeout, unlocking: unlocking)

func key(_ words: [String]) -> CredentialKey {
    guard words.count == 3 else { usage() }
    return CredentialKey(provider: ProviderID(words[0]), appID: words[1], account: words[2])
}

do {
    switch command {
    case "load":
        let credential = try await store.load(key(rest))
        emit(Output(ok: true, found: credential != nil, keys: credential.map { ["\($0.key)"] }), exitCode: 0)
    case "load-token":
        let credential = try await store.load(key(rest))
        emit(Output(ok: true, found: credential != nil, token: credential?.token.tokenString), exitCode: 0)
    case "save":
        let key = key(rest)
        let token = AccessToken(tokenString: "probe-token", provider: key.provider, appID: key.appID)
        try await store.save(StoredCredential(key: key, token: token))
        emit(Output(ok: true), exitCode: 0)
    case "delete":
        let deleted = try await store.delete(key(rest))
        emit(Output(ok: true, found: deleted), exitCode: 0)
    case "list":
        let credentials = try await store.list(provider: rest.first.map { ProviderID($0) })
        emit(Output(ok: true, keys: credentials.map { "\($0.key)" }), exitCode: 0)
    case "status":
        let status = try await store.status()
        emit(Output(ok: true, status: status.description), exitCode: 0)
    case "resolve":
        guard rest.count == 2, let policy = StoragePolicy(rawValue: rest[0]) else { usage() }
        let resolved = try await policy.resolve(fileURL: URL(fileURLWithPath: rest[1]), keyring: store)
        emit(Output(ok: true, backend: resolved.backend.rawValue, warning: resolved.warning), exitCode: 0)
    default:
        usage()
    }
} catch let error as CredentialStoreError {
    emit(Output(ok: false, kind: error.kind.rawValue, message: error.message), exitCode: 1)
} catch {
    emit(Output(ok: false, kind: "other", message: "\(error)"), exitCode: 1)
}
