import Foundation
import Sesame
import SesameCommandLine

// sesame-git-credential-probe: git's credential helper on the logic of the coming
// `sesame git-credential` command, for tests that run the real `git credential fill`:
//
//   git -c credential.helper='!/path/sesame-git-credential-probe' credential fill
//
// It reads logins from the file store named by SESAME_PROBE_STORE (a test's store, never the
// person's keyring). It answers `get` for a host with a login, prints nothing otherwise, and
// exits 0; unreadable input is reported on standard error with exit status 1.

let arguments = CommandLine.arguments.dropFirst()
let operation = arguments.first ?? ""
var input = ""
while let line = readLine(strippingNewline: false) {
    input += line
    if line == "\n" || line == "\r\n" { break }
}
do {
    guard let request = try GitCredentialRequest.parse(operation: operation, input: input) else { exit(0) }
    guard let path = ProcessInfo.processInfo.environment["SESAME_PROBE_STORE"] else {
        StandardStreams.err("sesame-git-credential-probe: set SESAME_PROBE_STORE to a credential file.\n")
        exit(1)
    }
    let store = FileCredentialStore(url: URL(fileURLWithPath: path))
    let answer = try await GitCredential.answer(to: request) { host, username in
        try await GitCredential.storedLogin(in: store, host: host, username: username).map(GitCredentialLogin.init)
    }
    if let answer { StandardStreams.out(answer.formatted) }
    exit(0)
} catch {
    StandardStreams.err("\(error)\n")
    exit(1)
}
