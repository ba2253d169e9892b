import Foundation
import SesameCommandLine
import SesameDesktop
import Testing

@Suite("Completions and the man page come from the command tree")
struct CompletionTests {
    init() { TestProviders.bootstrap() }

    @Test(
        "completion takes one of bash, zsh, fish; manpage takes nothing",
        arguments: [
            (["completion", "bash"], CompletionCommand.Format.bash), (["completion", "zsh"], .zsh),
            (["completion", "fish"], .fish), (["manpage"], .man),
        ])
    func parses(_ arguments: [String], _ format: CompletionCommand.Format) throws {
        #expect(try SesameCLI.parse(arguments) == .completion(CompletionCommand(format: format)))
    }

    @Test(
        "a missing, unknown or extra shell is a usage error naming the shells",
        arguments: [["completion"], ["completion", "tcsh"], ["completion", "man"], ["completion", "bash", "zsh"]])
    func refuses(_ arguments: [String]) {
        #expect(throws: UsageError.self) { try SesameCLI.parse(arguments) }
        do {
            _ = try SesameCLI.parse(arguments)
        } catch {
            #expect(error.command == "completion")
            #expect(arguments.count > 2 || error.message.contains("bash, zsh, fish"), "\(error.message)")
        }
    }

    @Test("every command and every option of the tree is in each script and in the man page")
    func everyCommand() {
        let texts = CompletionCommand.Format.allCases.map { ($0, CompletionCommand(format: $0).text) }
        for definition in SesameCLI.commands {
            let spec = definition.spec
            for (format, text) in texts {
                let name = format == .man ? "sesame \(spec.name.replacingOccurrences(of: "-", with: "\\-"))" : spec.name
                #expect(text.contains(name), "\(format) lacks the command \(spec.name)")
                for option in spec.options {
                    let spelled =
                        switch format {
                        case .man: "\\-\\-\(option.name.replacingOccurrences(of: "-", with: "\\-"))"
                        case .fish: "-l \(option.name)"
                        case .bash, .zsh: "--\(option.name)"
                        }
                    #expect(text.contains(spelled), "\(format) lacks \(spec.name) --\(option.name)")
                }
            }
        }
    }

    @Test("provider commands complete the providers' names, and only those commands do")
    func providers() {
        let bash = CompletionCommand(format: .bash).text
        let names = Desktop.providers.map(\.name).joined(separator: " ")
        let tokenCase = bash.components(separatedBy: "token)\n").dropFirst().first ?? ""
        #expect(tokenCase.prefix(while: { $0 != ";" }).contains("arguments='\(names)'"), "\(tokenCase.prefix(300))")
        let statusCase = bash.components(separatedBy: "status)\n").dropFirst().first ?? ""
        #expect(statusCase.prefix(while: { $0 != ";" }).contains("arguments=''"), "\(statusCase.prefix(300))")
    }

    @Test("the man page escapes hyphens and backslashes and starts no text line with a control character")
    func roff() {
        let page = CompletionCommand(format: .man).text
        #expect(page.hasPrefix(".\\\""))
        #expect(page.contains(".TH SESAME 1"))
        for line in page.split(separator: "\n") where !line.hasPrefix(".") && !line.hasPrefix("\\&") {
            #expect(!line.hasPrefix("'"), "\(line)")
            #expect(!line.contains(" -") || line.contains("\\-"), "an unescaped hyphen: \(line)")
        }
        #expect(ManPage.escaped("a-b\\c\n.x") == "a\\-b\\ec\n\\&.x")
    }

    @Test("sesame completion bash and sesame manpage print on standard output and exit 0")
    func runs() async {
        let cli = try? InProcessCLI()
        let bash = await cli?.run(["completion", "bash"])
        #expect(bash?.status == 0)
        #expect(bash?.output.contains("complete -o default -F _sesame sesame") == true)
        let man = await cli?.run(["manpage"])
        #expect(man?.status == 0)
        #expect(man?.output.contains(".SH EXIT STATUS") == true)
    }
}
