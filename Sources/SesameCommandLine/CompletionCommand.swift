import Foundation
import Sesame
import SesameDesktop

/// `sesame completion bash|zsh|fish` and `sesame manpage`: shell completions and the sesame(1)
/// manual page, generated from ``SesameCLI/commands``, the same tree that `--help` prints, so
/// neither can drift from what the parser accepts.
package struct CompletionCommand: Sendable, Equatable {
    /// What to print.
    package enum Format: String, Sendable, Equatable, CaseIterable {
        case bash, zsh, fish
        /// The sesame(1) page, in roff.
        case man
    }

    package var format: Format

    package init(format: Format) { self.format = format }

    static let shells = Format.allCases.filter { $0 != .man }.map(\.rawValue)

    static let definition = CommandDefinition(
        name: "completion",
        spec: CommandSpec(
            name: "completion", summary: "Print the shell completion script for bash, zsh or fish.",
            synopses: ["bash|zsh|fish"],
            discussion: """
                scripts/install puts each script where its shell finds it. To load one by hand:
                  bash: source <(\(Desktop.programName) completion bash)
                  zsh:  \(Desktop.programName) completion zsh > "${fpath[1]}/_\(Desktop.programName)" (a directory in $fpath)
                  fish: \(Desktop.programName) completion fish > ~/.config/fish/completions/\(Desktop.programName).fish
                """,
            examples: [
                (
                    "source <(\(Desktop.programName) completion bash)",
                    "Complete \(Desktop.programName)'s commands in this bash"
                )
            ])
    ) { parsed throws(UsageError) in
        guard let shell = parsed.positionals.first else {
            throw UsageError("name the shell: \(shells.joined(separator: ", "))", command: "completion")
        }
        guard let format = Format(rawValue: shell), format != .man else {
            throw UsageError(
                "unknown shell '\(shell.sanitizedForTerminal)'; the shells are \(shells.joined(separator: ", "))",
                command: "completion")
        }
        try noExtra(parsed, after: 1, command: "completion")
        return .completion(CompletionCommand(format: format))
    }

    static let manPageDefinition = CommandDefinition(
        name: "manpage",
        spec: CommandSpec(
            name: "manpage",
            summary: "Print the \(Desktop.programName)(1) manual page (roff), as scripts/install installs it.",
            synopses: [""],
            examples: [("\(Desktop.programName) manpage | man -l -", "Read the manual without installing it")])
    ) { parsed throws(UsageError) in
        try noExtra(parsed, after: 0, command: "manpage")
        return .completion(CompletionCommand(format: .man))
    }

    /// `sesame __complete accounts PROVIDER [--storage MODE]`: the names of the provider's stored
    /// accounts, one a line, for `switch PROVIDER <Tab>` and `--account <Tab>` (as `gh __complete`
    /// serves gh's scripts). It reads the store and nothing else: no provider is asked, no
    /// keyring is unlocked, and it prints nothing when there is nothing to offer.
    package struct Accounts: Sendable, Equatable {
        package var provider: String
        package var storage: StorageMode?

        func run(
            io: CommandIO, environment: [String: String], keyring: @escaping DesktopStorage.KeyringFactory
        ) async -> Int32 {
            do {
                let configuration = try DesktopConfiguration.resolve(
                    overrides: .init(storage: storage), environment: environment)
                let storage = try await DesktopStorage.select(
                    configuration.storage, keyring: keyring, environment: environment)
                let names: Set<String>
                let backend = Desktop.storageBackends.first { $0.name == storage.kind }
                if let known = await backend?.accountNames(in: storage.store, provider: ProviderID(provider)) {
                    names = known
                } else {
                    let listing = try await storage.store.listing(provider: ProviderID(provider))
                    names = Set(listing.credentials.map(\.key.account) + listing.unreadable.compactMap(\.key?.account))
                }
                io.write(names.sorted().map { $0.sanitizedForTerminal + "\n" }.joined())
                return ExitStatus.success
            } catch {
                return ExitStatus.unavailable
            }
        }
    }

    static let accountsDefinition = CommandDefinition(
        name: "__complete",
        spec: CommandSpec(
            name: "__complete", summary: "The stored accounts' names, for the completion scripts.",
            synopses: ["accounts PROVIDER [--storage MODE]"], options: [storageOption])
    ) { parsed throws(UsageError) in
        guard parsed.positionals.count == 2, parsed.positionals[0] == "accounts" else {
            throw UsageError("usage: \(Desktop.programName) __complete accounts PROVIDER", command: "__complete")
        }
        return .completeAccounts(
            Accounts(provider: parsed.positionals[1], storage: try storageMode(parsed, command: "__complete")))
    }

    /// The script or page.
    package var text: String {
        switch format {
        case .bash: Self.bash
        case .zsh: Self.zsh
        case .fish: Self.fish
        case .man: ManPage.text
        }
    }
}

// MARK: - what the scripts complete, from the command tree

extension CompletionCommand {
    /// The commands, in help's order.
    static var specs: [CommandSpec] { SesameCLI.commands.map(\.spec) }

    /// Whether a command's first argument is a provider (`sesame token PROVIDER`).
    static func takesProvider(_ spec: CommandSpec) -> Bool { spec.synopses.first?.hasPrefix("PROVIDER") == true }

    /// The provider names a command line may give.
    static var providerNames: [String] { Desktop.providers.map(\.name) }

    /// Words that may follow the command itself, other than options.
    static func arguments(of spec: CommandSpec) -> [String] {
        if takesProvider(spec) { return providerNames }
        switch spec.name {
        case "completion": return shells
        default: return []
        }
    }

    /// The values an option takes, when they are known words (`--storage` modes, providers).
    static func values(of option: OptionSpec) -> [String] {
        switch option.name {
        case "storage": return StorageMode.allCases.map(\.rawValue)
        case "provider": return providerNames
        case "token-type": return KubeTokenKind.allCases.map(\.rawValue)
        default: return []
        }
    }

    /// Every option whose values are known words, by name, across the commands.
    static var knownValues: [(name: String, values: [String])] {
        var seen: Set<String> = []
        var result: [(String, [String])] = []
        for option in specs.flatMap(\.options) where seen.insert(option.name).inserted {
            let words = values(of: option)
            if !words.isEmpty { result.append((option.name, words)) }
        }
        return result
    }

    /// Whether a command's second argument is an account (`sesame switch PROVIDER ACCOUNT`).
    static func takesAccount(_ spec: CommandSpec) -> Bool {
        spec.synopses.first?.hasPrefix("PROVIDER ACCOUNT") == true
    }

    /// The option whose value is an account name, completed from the store.
    static let accountOptionName = "account"

    /// The login flags each provider takes (`sesame login github --<Tab>` offers GitHub's only).
    static var loginFlagsByProvider: [(provider: String, flags: [String])] {
        Desktop.providers.map { plugin in
            (plugin.name, plugin.settings(instance: plugin.name).filter(\.isFlag).map { "--\($0.name)" })
        }
    }

    /// The program's name as a shell function's name: `_NAME` (`_sesame`), `-` and `.` made `_`.
    static var function: String {
        "_" + String(Desktop.programName.map { $0.isASCII && ($0.isLetter || $0.isNumber) ? $0 : "_" })
    }

    /// Text inside single quotes in a shell script.
    static func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: #"'\''"#) + "'" }
}

// MARK: - bash

extension CompletionCommand {
    static var bash: String {
        let names = specs.map(\.name) + ["help"]
        var cases = ""
        let providerFlags = Set(loginFlagsByProvider.flatMap(\.flags))
        for spec in specs {
            // login's provider flags are offered for the provider named, below.
            let options =
                spec.name == "login" ? spec.options.filter { !providerFlags.contains("--\($0.name)") } : spec.options
            let flags = options.filter { !$0.takesValue }.map { "--\($0.name)" } + ["--help"]
            let valued = spec.options.filter(\.takesValue).map { "--\($0.name)" }
            var perProvider = ""
            if spec.name == "login" {
                perProvider = "                case \"${COMP_WORDS[2]}\" in\n"
                for (provider, flags) in loginFlagsByProvider where !flags.isEmpty {
                    perProvider +=
                        "                    \(provider)) options=\"$options \(flags.joined(separator: " "))\" ;;\n"
                }
                perProvider += "                esac\n"
            }
            cases += """
                        \(spec.name))
                            options=\(quoted((flags + valued.filter { !providerFlags.contains($0) || spec.name != "login" }).joined(separator: " ")))
                            valued=\(quoted(valued.joined(separator: " ")))
                            arguments=\(quoted(arguments(of: spec).joined(separator: " ")))
                            account_argument=\(takesAccount(spec) ? "1" : "")

                """
            cases += perProvider + "                ;;\n"
        }
        var valueCases = ""
        for (name, words) in knownValues {
            valueCases +=
                "            --\(name)) COMPREPLY=($(compgen -W \(quoted(words.joined(separator: " "))) -- \"$cur\")); return ;;\n"
        }
        let program = Desktop.programName
        let function = Self.function
        return """
            # bash completion for \(program); generated by '\(program) completion bash' from the command tree.
            # The stored accounts of the provider named (the second word), from the store the
            # command line names with --storage, or the default one.
            \(function)_accounts() {
                local storage=() i
                for ((i = 3; i < COMP_CWORD; i++)); do
                    if [[ "${COMP_WORDS[i]}" == --storage ]]; then
                        [[ "${COMP_WORDS[i+1]}" == = ]] && storage=(--storage "${COMP_WORDS[i+2]}") || storage=(--storage "${COMP_WORDS[i+1]}")
                    fi
                done
                "${COMP_WORDS[0]}" __complete accounts "${COMP_WORDS[2]}" "${storage[@]}" 2>/dev/null
            }
            # Those starting with the word being completed, quoted for the command line.
            \(function)_complete_accounts() {
                local IFS=$'\\n' name
                COMPREPLY=()
                for name in $(\(function)_accounts); do
                    [[ "$name" == "$cur"* ]] && COMPREPLY+=("$(printf '%q' "$name")")
                done
            }
            \(function)() {
                local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
                local options="" valued="" arguments="" account_argument=""
                COMPREPLY=()
                if ((COMP_CWORD == 1)); then
                    COMPREPLY=($(compgen -W \(quoted((names + ["--help", "--version"]).joined(separator: " "))) -- "$cur"))
                    return
                fi
                case "${COMP_WORDS[1]}" in
                    help)
                        ((COMP_CWORD == 2)) && COMPREPLY=($(compgen -W \(quoted(specs.map(\.name).joined(separator: " "))) -- "$cur"))
                        return
                        ;;
            \(cases)        *) return ;;
                esac
                case "$cur" in
                    --*=*) return ;;
                    -*)
                        COMPREPLY=($(compgen -W "$options" -- "$cur"))
                        return
                        ;;
                esac
                case "$prev" in
                    --\(accountOptionName)) \(function)_complete_accounts; return ;;
            \(valueCases)        esac
                local word
                for word in $valued; do
                    # The value of an option: left to the default (file names).
                    [[ "$prev" == "$word" ]] && return
                done
                ((COMP_CWORD == 2)) && COMPREPLY=($(compgen -W "$arguments" -- "$cur"))
                ((COMP_CWORD == 3)) && [[ -n "$account_argument" ]] && \(function)_complete_accounts
            }
            complete -o default -F \(function) \(program)

            """
    }
}

// MARK: - zsh

extension CompletionCommand {
    /// Text inside `[...]` of an `_arguments` spec.
    static func zshDescription(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "[", with: "(")
            .replacingOccurrences(of: "]", with: ")").replacingOccurrences(of: ":", with: "\\:")
    }

    static var zsh: String {
        let program = Desktop.programName
        let function = Self.function
        let commandList = specs.map { quoted("\($0.name):\(zshDescription($0.summary))") }
            .joined(separator: "\n        ")
        func line(_ option: OptionSpec) -> String {
            let repeatable = option.isRepeatable ? "*" : ""
            let words = values(of: option)
            let action =
                option.name == accountOptionName
                ? "\(function)_accounts" : words.isEmpty ? " " : "(\(words.joined(separator: " ")))"
            let value = option.valueName.map { ":\(zshDescription($0)):\(action)" } ?? ""
            return quoted("\(repeatable)--\(option.name)[\(zshDescription(option.summary))]\(value)")
        }
        let providerFlags = Set(loginFlagsByProvider.flatMap(\.flags))
        var cases = ""
        for spec in specs {
            // login's provider flags are offered for the provider named (`$words[2]`) only.
            let isLogin = spec.name == "login"
            var lines = spec.options.filter { !isLogin || !providerFlags.contains("--\($0.name)") }.map(line)
            lines.append(quoted("(- *)--help[Show this help.]"))
            let words = arguments(of: spec)
            if !words.isEmpty {
                lines.append(quoted("1:argument:(\(words.joined(separator: " ")))"))
            }
            if takesAccount(spec) { lines.append(quoted("2:account:\(function)_accounts")) }
            lines.append(quoted("*::argument: _default"))
            cases += "        \(spec.name))\n"
            if isLogin {
                cases += "            local -a provider_options\n            case $words[2] in\n"
                for (provider, flags) in loginFlagsByProvider where !flags.isEmpty {
                    let options = flags.compactMap { flag in spec.options.first { "--\($0.name)" == flag } }
                    cases +=
                        "            \(provider)) provider_options=(\(options.map(line).joined(separator: " "))) ;;\n"
                }
                cases += "            esac\n"
                lines.insert("$provider_options", at: 0)
            }
            cases += "            _arguments -s \\\n                "
            cases += lines.joined(separator: " \\\n                ") + "\n            ;;\n"
        }
        return """
            #compdef \(program)
            # zsh completion for \(program); generated by '\(program) completion zsh' from the command tree.
            # The stored accounts of the provider named after the command, from the store that
            # --storage names, or the default one.
            \(function)_accounts() {
                local -a names storage
                local i
                for ((i = 3; i < $#words; i++)); do
                    [[ $words[i] == --storage ]] && storage=(--storage $words[i+1])
                done
                names=(${(f)"$($\(function)_program __complete accounts $words[2] $storage 2>/dev/null)"})
                _describe -t accounts 'account' names
            }
            \(function)() {
                local \(function)_program=$words[1]
                local -a commands
                commands=(
                    \(commandList)
                    'help:Show help for a command.'
                )
                if (( CURRENT == 2 )); then
                    _describe -t commands '\(program) command' commands
                    return
                fi
                local command=$words[2]
                shift words
                (( CURRENT-- ))
                case $command in
                help)
                    _describe -t commands '\(program) command' commands
                    ;;
            \(cases)    esac
            }
            if [ "$funcstack[1]" = "_\(program)" ]; then
                \(function) "$@"
            else
                compdef \(function) \(program)
            fi

            """
    }
}

// MARK: - fish

extension CompletionCommand {
    static var fish: String {
        let program = Desktop.programName
        let accounts = "_\(function)_accounts"
        var lines = [
            "# fish completion for \(program); generated by '\(program) completion fish' from the command tree.",
            "complete -c \(program) -f",
            "complete -c \(program) -n __fish_use_subcommand -l version -d 'Print the version.'",
            "complete -c \(program) -n __fish_use_subcommand -a help -d 'Show help for a command.'",
        ]
        // The stored accounts of the provider named after the command, from the store that
        // --storage names, or the default one.
        lines += [
            "function \(accounts)",
            "    set -l words (commandline -opc)",
            "    set -l storage",
            "    set -l at (contains -i -- --storage $words); and set -q words[(math $at + 1)]; "
                + "and set storage --storage $words[(math $at + 1)]",
            "    $words[1] __complete accounts $words[3] $storage 2>/dev/null",
            "end",
        ]
        let allNames = specs.map(\.name).joined(separator: " ")
        lines.append("complete -c \(program) -n '__fish_seen_subcommand_from help' -a \(quoted(allNames))")
        let flagsByProvider = loginFlagsByProvider
        let providerFlags = Set(flagsByProvider.flatMap(\.flags))
        for spec in specs {
            lines.append("complete -c \(program) -n __fish_use_subcommand -a \(spec.name) -d \(quoted(spec.summary))")
            let seen = quoted("__fish_seen_subcommand_from \(spec.name)")
            for option in spec.options {
                let words = values(of: option)
                let value =
                    !option.takesValue
                    ? ""
                    : option.name == accountOptionName
                        ? " -x -a '(\(accounts))'"
                        : words.isEmpty ? " -r -F" : " -x -a \(quoted(words.joined(separator: " ")))"
                // login's provider flags are offered once the provider is named, for that provider only.
                let conditions =
                    spec.name == "login" && providerFlags.contains("--\(option.name)")
                    ? flagsByProvider.filter { $0.flags.contains("--\(option.name)") }.map {
                        quoted("__fish_seen_subcommand_from login; and __fish_seen_subcommand_from \($0.provider)")
                    }
                    : [seen]
                for condition in conditions {
                    lines.append(
                        "complete -c \(program) -n \(condition) -l \(option.name)\(value) -d \(quoted(option.summary))")
                }
            }
            lines.append("complete -c \(program) -n \(seen) -s h -l help -d 'Show this help.'")
            let words = arguments(of: spec)
            if !words.isEmpty {
                let condition = quoted(
                    "__fish_seen_subcommand_from \(spec.name); and test (count (commandline -opc)) -eq 2")
                lines.append("complete -c \(program) -n \(condition) -a \(quoted(words.joined(separator: " ")))")
            }
            if takesAccount(spec) {
                let condition = quoted(
                    "__fish_seen_subcommand_from \(spec.name); and test (count (commandline -opc)) -eq 3")
                lines.append("complete -c \(program) -n \(condition) -a '(\(accounts))'")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

// MARK: - the manual page

/// sesame(1) in roff (man(7) macros), from the command tree, the exit statuses and the providers'
/// settings.
package enum ManPage {
    /// Text safe in roff: backslashes and hyphens escaped, no line starting with a control character.
    package static func escaped(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            let body = line.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
            return body.hasPrefix(".") || body.hasPrefix("'") ? "\\&" + body : body
        }.joined(separator: "\n")
    }

    /// A discussion's paragraphs: flowing text filled, indented lines (examples, JSON) kept as they are.
    static func paragraphs(_ text: String) -> String {
        var out = ""
        var filled: [String] = []
        var verbatim: [String] = []
        func flush() {
            if !filled.isEmpty { out += ".PP\n" + escaped(filled.joined(separator: "\n")) + "\n" }
            if !verbatim.isEmpty {
                out += ".PP\n.nf\n.RS 4\n" + escaped(verbatim.joined(separator: "\n")) + "\n.RE\n.fi\n"
            }
            filled = []
            verbatim = []
        }
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.allSatisfy({ $0 == " " }) {
                flush()
            } else if line.hasPrefix(" ") {
                if !filled.isEmpty { flush() }
                verbatim.append(String(line))
            } else {
                if !verbatim.isEmpty { flush() }
                filled.append(String(line))
            }
        }
        flush()
        return out
    }

    package static var text: String {
        let program = escaped(Desktop.programName)
        var page = """
            .\\" \(program)(1); generated by '\(program) manpage' from the command tree that --help prints.
            .TH \(program.uppercased()) 1 "" "\(program) \(SesameCLI.version)" "User Commands"
            .SH NAME
            \(program) \\- sign in with identity providers, keep the logins in the keyring, explain their errors
            .SH SYNOPSIS
            .B \(program)
            .I command
            .RI [ options ]
            .br
            .B \(program) help
            .RI [ command ]
            .br
            .B \(program) \\-\\-version
            .SH DESCRIPTION
            .B \(program)
            signs in with identity providers from a Linux desktop or terminal, keeps the logins in the
            desktop keyring (the Secret Service), prints tokens for scripts, and says what a provider's error
            means and what to do. A provider whose plug\\-in brings an emulator uses it when nothing is
            configured for that provider; its state is kept under
            .IR $XDG_STATE_HOME/sesame/ .
            Every command takes
            .B \\-\\-help
            and prints the text of its section below.
            .SH COMMANDS

            """
        for spec in SesameCLI.commands.map(\.spec) {
            page += ".SS \"\(program) \(escaped(spec.name))\"\n\(escaped(spec.summary))\n"
            page += ".PP\n.nf\n" + escaped(spec.usage) + "\n.fi\n"
            if let discussion = spec.discussion { page += paragraphs(discussion) }
            for option in spec.options {
                let value = option.valueName.map { " \\fI\(escaped($0))\\fR" } ?? ""
                page += ".TP\n\\fB\\-\\-\(escaped(option.name))\\fR\(value)\n\(escaped(option.summary))\n"
            }
            for example in spec.examples {
                page += ".PP\n\(escaped(example.comment)):\n.nf\n.RS 4\n\(escaped(example.command))\n.RE\n.fi\n"
            }
        }
        page += ".SH EXIT STATUS\n"
        for (status, meaning) in ExitStatus.table {
            page += ".TP\n.B \(status)\n\(escaped(meaning))\n"
        }
        page += ".SH ENVIRONMENT\n"
        var seen: Set<String> = []
        for plugin in Desktop.providers {
            for setting in plugin.settings(instance: plugin.name) {
                guard let variable = setting.environment, seen.insert(variable).inserted else { continue }
                page += ".TP\n.B \(escaped(variable))\n\(escaped(plugin.displayName)): \(escaped(setting.summary))\n"
            }
        }
        let modes = StorageMode.allCases.map(\.rawValue)
        let storage = "Where logins are kept: \(modes.dropLast().joined(separator: ", ")) or \(modes.last ?? "auto")."
        page += ".TP\n.B SESAME_STORAGE\n\(escaped(storage))\n"
        for backend in Desktop.storageBackends {
            for variable in backend.variables where seen.insert(variable.name).inserted {
                page += ".TP\n.B \(escaped(variable.name))\n\(escaped(variable.summary))\n"
            }
        }
        page += """
            .TP
            .B SESAME_DEBUG
            1 (anything but empty, 0 or false): as
            .BR \\-\\-debug ,
            print each HTTP exchange, renewal decision and store operation on standard error, never a
            token or secret.
            .TP
            .B SESAME_BROWSER
            A command that opens a login's address (the address is its last argument); none, or empty,
            when no browser opens here: device login, or the address printed to paste back.
            .TP
            .B NO_COLOR
            When set, no colour is printed.
            .TP
            .B KUBERNETES_EXEC_INFO
            Set by kubectl for
            .BR "\(program) kubectl\\-credential" :
            the ExecCredential version to print, and whether a person is at the terminal.
            .SH FILES
            .TP
            .I $XDG_CONFIG_HOME/sesame/config.json
            Settings per provider, the named instances a provider may have, and in
            .B registries
            the login each container registry host gets from
            .BR docker\\-credential\\-\(program) .
            .TP
            .I $XDG_STATE_HOME/sesame/
            The active account of each provider, the built\\-in emulator's state, and
            .I credentials.json
            when logins are kept in a file (only when chosen).
            .SH SEE ALSO
            .BR secret\\-tool (1),
            .BR kubectl (1),
            .BR docker\\-credential\\-\(program) ,
            .BR sysexits (3)

            """
        return page
    }
}
