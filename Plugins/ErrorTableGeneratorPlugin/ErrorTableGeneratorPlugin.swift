import Foundation
import PackagePlugin

/// Turns every `*Errors.json` file of a target into Swift at build time.
///
/// Each `NameErrors.json` becomes `NameErrors.swift` in the plugin's work directory, holding
/// `enum NameErrors { static let table: ErrorRuleTable }` for the Sesame core. The generator
/// (`sesame-error-table-gen`) checks every row first; a malformed row fails the build with a
/// message naming the file, line, row number and row id. Any provider module can use it:
///
///     .target(name: "MyProvider", dependencies: ["Sesame"], plugins: ["ErrorTableGeneratorPlugin"])
@main
struct ErrorTableGeneratorPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        guard let target = target as? SourceModuleTarget else { return [] }
        let generator = try context.tool(named: "sesame-error-table-gen").url
        return target.sourceFiles(withSuffix: "Errors.json").map { file in
            let input = file.url
            let name = input.deletingPathExtension().lastPathComponent
            let output = context.pluginWorkDirectoryURL.appending(path: "\(name).swift")
            return .buildCommand(
                displayName: "Generating \(name).swift from \(input.lastPathComponent)",
                executable: generator,
                arguments: [input.path(percentEncoded: false), output.path(percentEncoded: false)],
                inputFiles: [input],
                outputFiles: [output]
            )
        }
    }
}
