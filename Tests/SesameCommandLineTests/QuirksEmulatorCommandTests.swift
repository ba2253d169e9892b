import Foundation
import Sesame
import SesameTestSupport
import Testing

@testable import SesameCommandLine

@Suite("sesame emulator oidc --quirks")
struct QuirksEmulatorCommandTests {
    init() { TestProviders.bootstrap() }

    @Test("a provider the emulator does not know is refused when it starts: exit 64 naming the known ones")
    func unknownProvider() async throws {
        let errors = Locked("")
        let io = CommandIO(
            readStandardInput: { _ in Data() }, write: { _ in }, writeError: { text in errors.withLock { $0 += text } })
        let command = try EmulatorCommand(
            try ArgumentParser.parse(["oidc", "--quirks", "myspace"], for: EmulatorCommand.spec))
        let status = await command.run(io: io, environment: ["XDG_STATE_HOME": "/tmp/none"])
        #expect(status == ExitStatus.usage)
        let text = errors.withLock { $0 }
        #expect(text.contains("--quirks myspace"))
        #expect(text.contains("google, microsoft, gitlab, dropbox, slack"))
    }
}
