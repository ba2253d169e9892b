import Foundation
import Sesame
import SesameHTTPServer

/// The emulator's pages: plain, readable HTML with every piece of text escaped.
package enum HTML {
    /// Escapes text for an HTML text node or a quoted attribute.
    package static func escape(_ text: String) -> String { HTMLEscaping.escape(text) }

    /// A whole page. `body` must already be escaped HTML; `header` is trusted HTML (the
    /// emulator's own banner).
    package static func page(title: String, body: String, header: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title))</title>
        <style>
        body { font-family: system-ui, sans-serif; background: #f0f2f5; color: #1c1e21; margin: 0; }
        header { background: #1877f2; color: #fff; padding: 0.6em 1em; font-weight: bold; }
        header small { font-weight: normal; opacity: 0.85; margin-left: 0.5em; }
        main { max-width: 32em; margin: 2em auto; background: #fff; border-radius: 8px; padding: 1.5em;
               box-shadow: 0 1px 3px rgba(0,0,0,.2); }
        h1 { font-size: 1.3em; margin-top: 0; }
        ul { list-style: none; padding: 0; }
        li { margin: 0.5em 0; }
        .buttons { display: flex; gap: 0.75em; margin-top: 1.5em; }
        button { font-size: 1em; padding: 0.5em 1.5em; border-radius: 6px; border: 1px solid #ccd0d5; background: #e4e6eb; }
        button.primary { background: #1877f2; color: #fff; border-color: #1877f2; }
        .error { color: #b00020; }
        .note { color: #65676b; font-size: 0.9em; }
        code { background: #f0f2f5; padding: 0 0.2em; }
        </style>
        </head>
        <body>
        <header>\(header)</header>
        <main>
        \(body)
        </main>
        </body>
        </html>
        """
    }
}
