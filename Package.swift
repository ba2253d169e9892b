// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Sesame",
    // Linux only (Debian 12 and alike): the core waits with epoll and timerfd, so no other
    // platform is declared.
    products: [
        .library(name: "Sesame", targets: ["Sesame"]),
        .library(name: "SesameTesting", targets: ["SesameTesting"]),
        .library(name: "SesameHTTPServer", targets: ["SesameHTTPServer"]),
        .library(name: "SesameCurl", targets: ["SesameCurl"]),
        .library(name: "SesameEmulator", targets: ["SesameEmulator"]),
        .library(name: "SesameFacebookEmulator", targets: ["SesameFacebookEmulator"]),
        .library(name: "SesameOIDCEmulator", targets: ["SesameOIDCEmulator"]),
        .library(name: "SesameGitHubEmulator", targets: ["SesameGitHubEmulator"]),
        .library(name: "SesameFacebook", targets: ["SesameFacebook"]),
        .library(name: "SesameOIDC", targets: ["SesameOIDC"]),
        .library(name: "SesameGitHub", targets: ["SesameGitHub"]),
        .library(name: "SesamePresets", targets: ["SesamePresets"]),
        .library(name: "SesameKeyring", targets: ["SesameKeyring"]),
        .library(name: "SesamePostgres", targets: ["SesamePostgres"]),
        .library(name: "SesamePass", targets: ["SesamePass"]),
        .library(name: "SesameDesktop", targets: ["SesameDesktop"]),
        // What a program registers with Desktop.bootstrap beyond the desktop defaults: stores and
        // emulators, each in its own product so that an app links only those it names.
        .library(name: "SesamePassDesktop", targets: ["SesamePassDesktop"]),
        .library(name: "SesamePostgresDesktop", targets: ["SesamePostgresDesktop"]),
        .library(name: "SesameFacebookEmulatorDesktop", targets: ["SesameFacebookEmulatorDesktop"]),
        .library(name: "SesameOIDCEmulatorDesktop", targets: ["SesameOIDCEmulatorDesktop"]),
        .library(name: "SesameGitHubEmulatorDesktop", targets: ["SesameGitHubEmulatorDesktop"]),
        .library(name: "SesameFacebookPlugin", targets: ["SesameFacebookPlugin"]),
        .library(name: "SesameOIDCPlugin", targets: ["SesameOIDCPlugin"]),
        .library(name: "SesameGitHubPlugin", targets: ["SesameGitHubPlugin"]),
        .library(name: "SesameCommandLine", targets: ["SesameCommandLine"]),
        .executable(name: "sesame", targets: ["sesame"]),
        .executable(name: "docker-credential-sesame", targets: ["docker-credential-sesame"]),
        // Turns a provider's `*Errors.json` table into Swift at build time; usable by any provider.
        .plugin(name: "ErrorTableGeneratorPlugin", targets: ["ErrorTableGeneratorPlugin"]),
    ],
    targets: [
        // System libraries: a module map and a header of static inline shims each.
        // OpenSSL's headers (libssl-dev, which scripts/bootstrap installs); libcrypto itself is opened
        // with dlopen when first used, not linked (see Sources/CCrypto/shim.h).
        .systemLibrary(name: "CCrypto", path: "Sources/CCrypto"),
        // libmicrohttpd's header (libmicrohttpd-dev, which scripts/bootstrap installs); the library
        // is opened with dlopen when a server first starts, not linked (Sources/CMicroHTTPD/shim.h).
        .systemLibrary(name: "CMicroHTTPD", path: "Sources/CMicroHTTPD"),
        // libcurl's headers (libcurl4-openssl-dev, which scripts/bootstrap installs); the library
        // itself is opened with dlopen when first used, not linked (see Sources/CCurl/shim.h).
        .systemLibrary(name: "CCurl", path: "Sources/CCurl"),
        .systemLibrary(
            name: "CLibSecret",
            path: "Sources/CLibSecret",
            pkgConfig: "libsecret-1",
            providers: [.apt(["libsecret-1-dev"])]
        ),
        // libpq's headers (libpq-dev, which scripts/bootstrap installs); the library is opened with
        // dlopen when a program first connects, not linked (see Sources/CLibPQ/shim.h).
        .systemLibrary(name: "CLibPQ", path: "Sources/CLibPQ", providers: [.apt(["libpq-dev"])]),
        // GPGME, GnuPG's library, linked (the `pass` store decrypts with it on every read).
        .systemLibrary(
            name: "CGPGME",
            path: "Sources/CGPGME",
            pkgConfig: "gpgme",
            providers: [.apt(["libgpgme-dev"])]
        ),
        // The keyring's C beyond CLibSecret's thin wrappers: the item schema, the D-Bus calls libsecret
        // does not make, the classification of GLib errors.
        .target(name: "CLibSecretShim", dependencies: ["CLibSecret"]),

        // The provider-neutral core.
        // Its base error rows (BaseErrors.json), which every provider's table extends, are Swift
        // made at build time like a provider's.
        .target(
            name: "Sesame", dependencies: ["CCrypto", "CSesameSystem"], plugins: ["ErrorTableGeneratorPlugin"]),
        // The few libc calls Swift's Glibc module does not import: spawning a child (with
        // PR_SET_PDEATHSIG on request), ppoll.
        .target(name: "CSesameSystem"),

        // Test doubles that people building on Sesame need in their own tests.
        .target(name: "SesameTesting", dependencies: ["Sesame"]),

        // The default HTTPTransport, on libcurl.
        .target(name: "SesameCurl", dependencies: ["Sesame", "CCurl", "CSesameSystem"]),

        .testTarget(name: "SesameTests", dependencies: ["Sesame", "SesameTesting", "SesameTestSupport", "CCrypto"]),

        // Helpers shared by test targets (running built executables as processes, holding a
        // request while a lock is checked, raw HTTP over loopback sockets). Not a product.
        .target(name: "SesameTestSupport", dependencies: ["Sesame", "SesamePostgres"], path: "Tests/SesameTestSupport"),
        .testTarget(
            name: "SesameCurlTests", dependencies: ["SesameCurl", "Sesame", "SesameHTTPServer", "SesameTestSupport"]),

        // An embedded HTTP server on libmicrohttpd, and the loopback redirect receiver on it.
        .target(name: "SesameHTTPServer", dependencies: ["Sesame", "CMicroHTTPD"]),
        .testTarget(
            name: "SesameHTTPServerTests",
            dependencies: ["SesameHTTPServer", "Sesame", "SesameTesting", "SesameTestSupport"]),
        // The core's browser and device login flows, run over real HTTP against small local servers.
        .testTarget(
            name: "SesameLoginFlowTests",
            dependencies: ["Sesame", "SesameHTTPServer", "SesameTesting", "SesameTestSupport"]),
        // The neutral emulator kit: the loopback listener, replies, HTML pages, form text,
        // refresh-token families, signals. Each provider's emulator is built on it.
        .target(name: "SesameEmulator", dependencies: ["Sesame", "SesameHTTPServer"]),
        // A local Facebook: login dialog, Graph API, device login, scenarios (fault injection).
        // It reads SesameFacebook's Graph version table: one list of versions and end dates.
        .target(
            name: "SesameFacebookEmulator",
            dependencies: ["SesameEmulator", "Sesame", "SesameHTTPServer", "SesameFacebook"]),
        // A local OpenID provider: discovery, authorization, tokens, userinfo, revocation, scenarios.
        .target(name: "SesameOIDCEmulator", dependencies: ["SesameEmulator", "Sesame", "SesameHTTPServer"]),
        // A local GitHub: OAuth app, device flow, REST API with rate limits, scenarios.
        .target(name: "SesameGitHubEmulator", dependencies: ["SesameEmulator", "Sesame", "SesameHTTPServer"]),
        .testTarget(
            name: "SesameEmulatorTests",
            dependencies: [
                "SesameEmulator", "SesameFacebookEmulator", "SesameOIDCEmulator", "SesameGitHubEmulator", "Sesame",
                "SesameCurl", "SesameTestSupport", "SesamePresets",
            ]),

        // Error tables as data: the generator (Foundation only, provider-neutral), its
        // command-line wrapper, and the build-tool plugin that runs it on `*Errors.json` files.
        .target(name: "SesameErrorTableGen"),
        .executableTarget(name: "sesame-error-table-gen", dependencies: ["SesameErrorTableGen"]),
        .plugin(
            name: "ErrorTableGeneratorPlugin",
            capability: .buildTool(),
            dependencies: ["sesame-error-table-gen"]
        ),
        .testTarget(
            name: "SesameErrorTableGenTests",
            dependencies: ["SesameErrorTableGen", "Sesame", "sesame-error-table-gen", "SesameTestSupport"]
        ),

        // The Facebook provider. Its error taxonomy is generated from GraphErrors.json.
        .target(name: "SesameFacebook", dependencies: ["Sesame"], plugins: ["ErrorTableGeneratorPlugin"]),
        .testTarget(
            name: "SesameFacebookTests",
            dependencies: ["SesameFacebook", "Sesame", "SesameTesting", "SesameTestSupport"]),

        // The generic OAuth 2.0 / OpenID Connect provider. Its errors are classified by the core's base rows.
        .target(name: "SesameOIDC", dependencies: ["Sesame"]),
        // End to end against the emulator's OIDC mode over CurlTransport, plus the error table rows.
        .testTarget(
            name: "SesameOIDCTests",
            dependencies: [
                "SesameOIDC", "Sesame", "SesameTesting", "SesameEmulator", "SesameOIDCEmulator", "SesameCurl",
                "SesameHTTPServer", "SesameTestSupport",
            ]
        ),

        // The GitHub provider: device flow, personal tokens, the REST client with rate-limit pacing.
        // Its error taxonomy is generated from GitHubErrors.json.
        .target(name: "SesameGitHub", dependencies: ["Sesame"], plugins: ["ErrorTableGeneratorPlugin"]),
        // Plain OAuth 2.0 providers said as data (Dropbox, Slack): descriptions on the core alone.
        .target(name: "SesamePresets", dependencies: ["Sesame"]),
        // End to end against the emulator's GitHub mode over CurlTransport, plus the error table rows.
        .testTarget(
            name: "SesameGitHubTests",
            dependencies: [
                "SesameGitHub", "Sesame", "SesameTesting", "SesameEmulator", "SesameGitHubEmulator", "SesameCurl",
                "SesameTestSupport",
            ]
        ),

        // The `sesame` command line: parsing and commands in a library the tests call directly,
        // and a thin executable.
        .target(
            name: "SesameCommandLine",
            dependencies: ["Sesame", "SesameDesktop", "SesameCurl", "SesameKeyring"]),
        // The program: its main.swift hands the command line its providers, stores and emulators,
        // one line each.
        .executableTarget(
            name: "sesame",
            dependencies: [
                "SesameCommandLine", "SesameFacebookPlugin", "SesameOIDCPlugin", "SesameGitHubPlugin",
                "SesamePassDesktop", "SesamePostgresDesktop", "SesameFacebookEmulatorDesktop",
                "SesameOIDCEmulatorDesktop", "SesameGitHubEmulatorDesktop", "SesamePresets",
            ]),
        // Container tools' credential helper: a thin executable over SesameCommandLine, with the
        // same providers as `sesame`.
        .executableTarget(
            name: "docker-credential-sesame",
            dependencies: [
                "SesameCommandLine", "SesameFacebookPlugin", "SesameOIDCPlugin", "SesameGitHubPlugin",
                "SesamePassDesktop", "SesamePostgresDesktop", "SesameFacebookEmulatorDesktop",
                "SesameOIDCEmulatorDesktop", "SesameGitHubEmulatorDesktop", "SesamePresets",
            ]),
        .testTarget(
            name: "SesameCommandLineTests",
            dependencies: [
                "SesameCommandLine", "SesameFacebook", "Sesame", "SesameDesktop", "SesameEmulator",
                "SesameFacebookEmulator",
                "SesameOIDCEmulator", "SesameGitHubEmulator", "SesameCurl",
                "SesameTestSupport", "sesame", "fb-login", "fb-publish", "fb-errors", "SesameHTTPServer",
                "sesame-fuzz", "SesameFacebookPlugin", "SesameOIDCPlugin", "SesameGitHubPlugin", "SesameOIDC",
                "SesamePostgres", "docker-credential-sesame", "SesamePassDesktop", "SesamePostgresDesktop",
                "SesameFacebookEmulatorDesktop", "SesameOIDCEmulatorDesktop", "SesameGitHubEmulatorDesktop",
                "sesame-quiet-probe", "fleet-worker", "SesameTesting",
            ]
        ),
        // A small library app that must print nothing (QuietLibraryTests runs it as a process).
        .executableTarget(
            name: "sesame-quiet-probe",
            dependencies: [
                "Sesame", "SesameCurl", "SesameDesktop", "SesameFacebook", "SesameFacebookEmulator",
                "SesameFacebookEmulatorDesktop", "SesameFacebookPlugin", "SesameOIDC", "SesameOIDCEmulator",
                "SesameOIDCPlugin", "SesameGitHub", "SesameGitHubEmulator", "SesameGitHubPlugin",
            ],
            path: "Tests/SesameQuietProbe"),

        // The desktop defaults in one call: libcurl, the keyring (a file only when opted in), the
        // loopback receiver, the system browser, terminal presenters, configuration from flags,
        // environment and config file, and the plug-in contract (ProviderPlugin) with the registry
        // the program hands in (Desktop.bootstrap). It names no provider, links no store beyond the
        // keyring and the file, and contains no emulator.
        .target(name: "SesameDesktop", dependencies: ["Sesame", "SesameCurl", "SesameHTTPServer", "SesameKeyring"]),
        // The stores and emulators a program registers (StorageBackend, EmulatorPlugin), each
        // beside what it wraps.
        .target(name: "SesamePassDesktop", dependencies: ["Sesame", "SesameDesktop", "SesamePass"]),
        .target(name: "SesamePostgresDesktop", dependencies: ["Sesame", "SesameDesktop", "SesamePostgres"]),
        .target(
            name: "SesameFacebookEmulatorDesktop",
            dependencies: ["Sesame", "SesameDesktop", "SesameEmulator", "SesameFacebookEmulator"]),
        .target(
            name: "SesameOIDCEmulatorDesktop",
            dependencies: ["Sesame", "SesameDesktop", "SesameEmulator", "SesameOIDCEmulator"]),
        .target(
            name: "SesameGitHubEmulatorDesktop",
            dependencies: ["Sesame", "SesameDesktop", "SesameEmulator", "SesameGitHubEmulator"]),
        // Each provider's desktop adapter, beside the provider: settings, login, status, doctor,
        // Desktop.<provider>(). No emulator: the program registers that.
        .target(
            name: "SesameFacebookPlugin",
            dependencies: ["Sesame", "SesameFacebook", "SesameDesktop", "SesameCurl", "SesameHTTPServer"]),
        .target(
            name: "SesameOIDCPlugin",
            dependencies: ["Sesame", "SesameOIDC", "SesameDesktop", "SesameCurl", "SesameHTTPServer"]),
        .target(name: "SesameGitHubPlugin", dependencies: ["Sesame", "SesameGitHub", "SesameDesktop", "SesameCurl"]),

        // The seed's sample app on a terminal: log in, publish, show the right message for each error.
        .executableTarget(
            name: "fb-login",
            dependencies: [
                "Sesame", "SesameFacebook", "SesameDesktop", "SesameFacebookPlugin", "SesameFacebookEmulatorDesktop",
            ],
            path: "Examples/fb-login"),
        .executableTarget(
            name: "fb-publish",
            dependencies: [
                "Sesame", "SesameFacebook", "SesameDesktop", "SesameFacebookPlugin", "SesameFacebookEmulatorDesktop",
            ],
            path: "Examples/fb-publish"),
        // One of N copies that post for many people from the logins a fleet shares in PostgreSQL.
        .executableTarget(
            name: "fleet-worker", dependencies: ["Sesame", "SesameFacebook", "SesamePostgres", "SesameCurl"],
            path: "Examples/fleet-worker"),
        .executableTarget(
            name: "fb-errors",
            dependencies: [
                "Sesame", "SesameFacebook", "SesameDesktop", "SesameFacebookPlugin", "SesameEmulator",
                "SesameFacebookEmulator", "SesameCurl", "SesameFacebookEmulatorDesktop",
            ],
            path: "Examples/fb-errors"),

        // Sessions, login, permissions, token lifecycle and the Graph client, end to end against
        // the emulator over CurlTransport, plus unit tests on a recording transport.
        .testTarget(
            name: "SesameFacebookProviderTests",
            dependencies: [
                "SesameFacebook", "Sesame", "SesameTesting", "SesameEmulator", "SesameFacebookEmulator", "SesameCurl",
                "SesameHTTPServer", "SesameTestSupport",
            ]),

        // The desktop keyring (Secret Service over D-Bus, through libsecret) and the storage policy.
        .target(name: "SesameKeyring", dependencies: ["Sesame", "CLibSecret", "CLibSecretShim"]),
        .testTarget(
            name: "SesameKeyringTests",
            dependencies: [
                "SesameKeyring", "Sesame", "sesame-keyring-probe", "SesameTestSupport",
                // `sesame doctor`, whose keyring lines come from SecretServiceInfo.
                "sesame",
            ]),
        // Runs one keyring call in its own process, so tests can give it a different D-Bus
        // environment (libsecret keeps one bus connection per process).
        .executableTarget(
            name: "sesame-keyring-probe", dependencies: ["SesameKeyring", "Sesame", "SesameTestSupport"],
            path: "Tests/SesameKeyringProbe"),

        // A fleet's store on PostgreSQL: credentials encrypted at rest, shared by every worker.
        .target(name: "SesamePostgres", dependencies: ["Sesame", "CLibPQ"]),
        // Against a real PostgreSQL that the tests start in a temporary directory and stop.
        .testTarget(
            name: "SesamePostgresTests",
            dependencies: [
                "SesamePostgres", "Sesame", "SesameTestSupport",
                // The fleet's Graph budget, against the emulator over HTTP.
                "SesameFacebook", "SesameFacebookEmulator", "SesameCurl", "SesameTesting",
            ]),

        // The standard Unix password store (`pass`), on GPGME: the store without a desktop.
        .target(name: "SesamePass", dependencies: ["Sesame", "CGPGME"]),
        // Against a real GnuPG (a throw-away GNUPGHOME and agent the tests make) and the real `pass`.
        .testTarget(
            name: "SesamePassTests",
            dependencies: ["SesamePass", "Sesame", "SesameTestSupport"]),

        // Side-by-side measurements: `swift run -c release sesame-bench <name> [--json]`.
        .executableTarget(
            name: "sesame-bench",
            dependencies: [
                "Sesame", "SesameHTTPServer", "SesameCurl", "CCurl", "SesameEmulator", "SesameFacebookEmulator",
                "SesameGitHubEmulator", "SesameFacebook",
                "SesameKeyring", "SesameGitHub", "SesameDesktop", "SesameFacebookPlugin", "CBenchSupport",
                "SesamePostgres", "SesamePass", "CLibPQ", "SesameOIDC", "SesameOIDCEmulator", "SesameTesting",
            ],
            path: "Benchmarks/SesameBench"
        ),
        // Thread placement for the graph benchmark (sched_setaffinity needs _GNU_SOURCE, which
        // Swift's Glibc module does not define).
        .target(name: "CBenchSupport", path: "Benchmarks/CBenchSupport"),
        // The fuzz targets, in one program (`sesame-fuzz <target>`): scripts/fuzz builds it with
        // libFuzzer and AddressSanitizer in .build-fuzz; an ordinary build replays inputs through it.
        .target(name: "CSesameFuzz", path: "Fuzz/CSesameFuzz"),
        .executableTarget(
            name: "sesame-fuzz",
            dependencies: [
                "CSesameFuzz", "Sesame", "SesameFacebook", "SesameOIDC", "SesameGitHub", "SesameHTTPServer",
                "SesameDesktop", "SesameCommandLine", "SesameFacebookPlugin", "SesameOIDCPlugin", "SesameGitHubPlugin",
                "SesamePassDesktop", "SesamePostgresDesktop", "SesameFacebookEmulatorDesktop",
                "SesameOIDCEmulatorDesktop", "SesameGitHubEmulatorDesktop",
            ],
            path: "Fuzz/SesameFuzz"),
        // A thousand requests through CurlTransport, to run under valgrind (Benchmarks/README.md).
        .executableTarget(
            name: "sesame-curl-leakcheck", dependencies: ["Sesame", "SesameCurl"], path: "Benchmarks/CurlLeakCheck"),
    ],
    swiftLanguageModes: [.v6]
)
