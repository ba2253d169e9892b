// sesame: the command-line program. Everything lives in SesameCommandLine, where tests can
// call the parser and the commands directly; this file only hands over the arguments.

import Foundation
import SesameCommandLine

exit(await SesameCLI.main(Array(CommandLine.arguments.dropFirst())))
