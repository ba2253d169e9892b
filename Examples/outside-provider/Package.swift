// swift-tools-version:6.0
import Foundation
import PackageDescription

// Sesame is used by path, from the checkout this example lives in. SwiftPM names a package used
// by path after its folder (`sesame` in a clone, `main` or a worktree's name elsewhere), and a
// product is asked for by that name; so the name is read from the path rather than written out.
let sesamePath = "../.."
let sesame = URL(fileURLWithPath: Context.packageDirectory).appendingPathComponent(sesamePath).standardized
    .lastPathComponent

let package = Package(
    name: "OutsideProvider",
    products: [
        .library(name: "Acme", targets: ["Acme"]),
        .library(name: "AcmeEmulator", targets: ["AcmeEmulator"]),
        .library(name: "AcmePlugin", targets: ["AcmePlugin"]),
        .executable(name: "acme-sesame", targets: ["acme-sesame"]),
    ],
    dependencies: [
        .package(path: sesamePath)
    ],
    targets: [
        // The provider: depends on Sesame's core only. Its error table, AcmeErrors.json, becomes
        // Swift at build time through Sesame's build-tool plugin.
        .target(
            name: "Acme",
            dependencies: [.product(name: "Sesame", package: sesame)],
            plugins: [.plugin(name: "ErrorTableGeneratorPlugin", package: sesame)]
        ),
        // A small Acme server on 127.0.0.1, on Sesame's embedded HTTP server.
        .target(
            name: "AcmeEmulator",
            dependencies: [
                .product(name: "Sesame", package: sesame),
                .product(name: "SesameHTTPServer", package: sesame),
            ]
        ),
        // The desktop plug-in: settings, login, status, doctor, the built-in and foreground emulator.
        .target(
            name: "AcmePlugin",
            dependencies: [
                "Acme", "AcmeEmulator",
                .product(name: "Sesame", package: sesame),
                .product(name: "SesameDesktop", package: sesame),
                .product(name: "SesameHTTPServer", package: sesame),
                .product(name: "SesameEmulator", package: sesame),
            ]
        ),
        // `sesame` with a fourth provider: its main.swift adds the plug-in with one line.
        .executableTarget(
            name: "acme-sesame",
            dependencies: [
                "AcmePlugin",
                .product(name: "SesameCommandLine", package: sesame),
                .product(name: "SesameDesktop", package: sesame),
                .product(name: "SesameFacebookPlugin", package: sesame),
                .product(name: "SesameOIDCPlugin", package: sesame),
                .product(name: "SesameGitHubPlugin", package: sesame),
            ]
        ),
        // Runs the built acme-sesame as a process, against its built-in Acme emulator.
        .testTarget(
            name: "AcmeTests",
            dependencies: [
                "Acme", "AcmeEmulator", "acme-sesame",
                .product(name: "Sesame", package: sesame),
                .product(name: "SesameCurl", package: sesame),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
