import Foundation
import Testing

/// The program hands in its stores, as swift-log's app hands in its handler: the command line, the
/// desktop defaults and the provider plug-ins link no store backend and no emulator of their own.
@Suite("module boundaries: stores and emulators are what the program registers")
struct ModuleBoundaryTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let registered = ["SesamePass", "SesamePostgres", "CGPGME", "CLibPQ"]

    @Test("SesameCommandLine's target in Package.swift names no store backend")
    func manifest() throws {
        let manifest = try String(contentsOf: Self.root.appending(path: "Package.swift"), encoding: .utf8)
        let start = try #require(
            manifest.range(of: #"name: "SesameCommandLine",\s*dependencies:"#, options: .regularExpression))
        let target = manifest[start.upperBound...].prefix { $0 != ")" }
        #expect(target.contains("\"SesameDesktop\""))
        for module in Self.registered { #expect(!target.contains("\"\(module)\""), "\(module)") }
    }

    @Test(
        "no source of the command line, the desktop defaults or a plug-in imports a store backend or an emulator",
        arguments: [
            "SesameCommandLine", "SesameDesktop", "SesameFacebookPlugin", "SesameOIDCPlugin", "SesameGitHubPlugin",
        ])
    func imports(_ module: String) throws {
        let folder = Self.root.appending(path: "Sources/\(module)")
        let files = try #require(FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil))
        var checked = 0
        for case let file as URL in files where file.pathExtension == "swift" {
            checked += 1
            for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
            where line.hasPrefix("import ") || line.contains(" import ") {
                let name = line.split(separator: " ").last.map(String.init) ?? ""
                #expect(!Self.registered.contains(name), "\(file.lastPathComponent): \(line)")
                #expect(!name.hasSuffix("Emulator"), "\(file.lastPathComponent): \(line)")
            }
        }
        #expect(checked > 0)
    }
}
