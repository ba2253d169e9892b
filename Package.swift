// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Sesame",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Sesame", targets: ["Sesame"]),
        .library(name: "SesameTesting", targets: ["SesameTesting"]),
        .library(name: "SesameHTTPServer", targets: ["SesameHTTPServer"]),
        .library(name: "SesameCurl", targets: ["SesameCurl"]),
        .library(name: "SesameEmulator", targets: ["SesameEmulator"]),
    ],
    targets: [
        // System libraries: a module map and a header of static inline shims each.
        .systemLibrary(
            name: "CCrypto",
            path: "Sources/CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CMicroHTTPD",
            path: "Sources/CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        .systemLibrary(
            name: "CCurl",
            path: "Sources/CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),

        // The provider-neutral core.
        .target(name: "Sesame", dependencies: ["CCrypto"]),

        // Test doubles that people building on Sesame need in their own tests.
        .target(name: "SesameTesting", dependencies: ["Sesame"]),

        // The default HTTPTransport, on libcurl.
        .target(name: "SesameCurl", dependencies: ["Sesame", "CCurl"]),

        .testTarget(name: "SesameTests", dependencies: ["Sesame", "SesameTesting"]),
        .testTarget(name: "SesameCurlTests", dependencies: ["SesameCurl", "Sesame", "SesameHTTPServer"]),

        // An embedded HTTP server on libmicrohttpd, and the loopback redirect receiver on it.
        .target(name: "SesameHTTPServer", dependencies: ["Sesame", "CMicroHTTPD"]),
        .testTarget(
            name: "SesameHTTPServerTests", dependencies: ["SesameHTTPServer", "Sesame", "SesameTesting"]),
        // A local Facebook: login dialog, Graph API, device login, scenarios (fault injection).
        .target(name: "SesameEmulator", dependencies: ["Sesame", "SesameHTTPServer"]),
        .testTarget(name: "SesameEmulatorTests", dependencies: ["SesameEmulator", "Sesame"]),

        // Side-by-side measurements: `swift run -c release sesame-bench <name> [--json]`.
        .executableTarget(
            name: "sesame-bench",
            dependencies: ["Sesame", "SesameHTTPServer", "SesameCurl", "CCurl", "SesameEmulator"],
            path: "Benchmarks/SesameBench"
        ),
        // A thousand requests through CurlTransport, to run under valgrind (Benchmarks/README.md).
        .executableTarget(
            name: "sesame-curl-leakcheck", dependencies: ["Sesame", "SesameCurl"], path: "Benchmarks/CurlLeakCheck"),
    ],
    swiftLanguageModes: [.v6]
)
