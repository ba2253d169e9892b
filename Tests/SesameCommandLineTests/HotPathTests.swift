import Foundation
import Testing

@Suite("The hot path starts nothing it does not use")
struct HotPathTests {
    @Test("token with a stored login of the built-in emulator prints it without starting the emulator")
    func tokenStartsNoEmulator() async throws {
        let cli = try InProcessCLI()
        try await cli.storeEmulatorLogin(account: "default", token: "EAAhotpath")
        let token = await cli.run(["token", "facebook"])
        #expect(token.status == 0, "\(token.error)")
        #expect(token.output == "EAAhotpath\n")
        let state = cli.root.appending(path: "state/sesame/emulator.json")
        #expect(!FileManager.default.fileExists(atPath: state.path), "the emulator started (and saved its state)")
    }

    @Test("status with a stored login of the built-in emulator starts it on the first request and asks it")
    func statusStartsEmulatorOnUse() async throws {
        let cli = try InProcessCLI()
        try await cli.storeEmulatorLogin(account: "default", token: "EAAunknown")
        let status = await cli.run(["status", "--timeout", "60"])
        // The emulator does not know this token: it was asked, and said so.
        #expect(status.status == 77, "\(status.output)\(status.error)")
        #expect(status.output.contains("default"), "\(status.output)")
        #expect(!status.output.contains("sesame-emulator.invalid"), "the placeholder address leaked: \(status.output)")
        let state = cli.root.appending(path: "state/sesame/emulator.json")
        #expect(FileManager.default.fileExists(atPath: state.path), "the emulator was never started")
    }
}
