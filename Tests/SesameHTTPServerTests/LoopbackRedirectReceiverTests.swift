import Foundation
import Sesame
import SesameHTTPServer
import SesameTestSupport
import SesameTesting
import Testing

@Suite("LoopbackRedirectReceiver over loopback", .timeLimit(.minutes(2)))
struct LoopbackRedirectReceiverTests {
    /// Makes the browser's request to the redirect URI in the background, as a browser would,
    /// and gives back its page when it comes.
    static func visit(_ url: URL) -> Task<FollowingBrowser.Visit, any Error> {
        Task {
            let response = try await LoopbackTransport().send(HTTPRequest(url: url))
            return FollowingBrowser.Visit(url: url, response: response)
        }
    }

    static func redirect(_ redirectURI: URL, _ items: [(String, String)]) -> URL {
        OAuth.appendingQuery(items, to: redirectURI)
    }

    @Test("a redirect with the right state delivers its code, and the browser is told it is signed in")
    func success() async throws {
        let receiver = LoopbackRedirectReceiver(appName: "Test App")
        let page = Locked<Task<FollowingBrowser.Visit, any Error>?>(nil)
        let seenURI = Locked<URL?>(nil)
        let code = try await receiver.receiveRedirect(
            expectedState: "s-123", provider: "example",
            open: { redirectURI in
                seenURI.withLock { $0 = redirectURI }
                page.withLock {
                    $0 = Self.visit(Self.redirect(redirectURI, [("code", "the-code"), ("state", "s-123")]))
                }
            },
            complete: { outcome, _ in
                guard case .code(let code) = outcome else { throw AuthError(category: .invalid, message: "no code") }
                return code
            })
        #expect(code == "the-code")
        let redirectURI = try #require(seenURI.withLock { $0 })
        #expect(redirectURI.scheme == "http")
        #expect(redirectURI.host == "127.0.0.1")
        #expect(redirectURI.path == "/callback")
        #expect((redirectURI.port ?? 0) > 0)
        let visit = try await #require(page.withLock { $0 }).value
        #expect(visit.status == 200)
        #expect(visit.body.contains("<title>Signed in</title>"))
        #expect(visit.body.contains("signed in to Test App"))
        #expect(!visit.body.contains("the-code"))
        // The listener is gone once the login is over.
        #expect(throws: (any Error).self) { _ = try RawHTTPConnection.connectBlocking(port: redirectURI.port!) }
    }

    @Test(
        "a redirect whose state does not match is refused and the login keeps waiting for the real one",
        arguments: [
            [("code", "c"), ("state", "forged")], [("code", "c")],
            [("code", "c"), ("state", "expected"), ("state", "x")],
        ])
    func stateMismatch(_ items: [(String, String)]) async throws {
        let receiver = LoopbackRedirectReceiver()
        let forged = Locked<FollowingBrowser.Visit?>(nil)
        let code = try await receiver.receiveRedirect(
            expectedState: "expected", provider: "example",
            open: { redirectURI in
                let visit = try await Self.visit(Self.redirect(redirectURI, items)).value
                forged.withLock { $0 = visit }
                _ = Self.visit(Self.redirect(redirectURI, [("code", "real"), ("state", "expected")]))
            },
            complete: { outcome, _ in
                guard case .code(let code) = outcome else { return "" }
                return code
            })
        #expect(code == "real")
        let visit = try #require(forged.withLock { $0 })
        #expect(visit.status == 400)
        #expect(visit.body.contains("Sign-in refused"))
        #expect(visit.body.contains("keeps waiting"))
    }

    /// Sends `head` to the redirect URI's port and reads the answer.
    static func raw(_ head: String, to redirectURI: URL) async throws -> RawHTTPConnection.Response {
        let connection = try await RawHTTPConnection.connect(port: redirectURI.port!)
        try await connection.send(head)
        guard case .response(let response) = try await connection.read() else {
            throw RawHTTPConnection.Failure(description: "closed without an answer")
        }
        return response
    }

    @Test("a redirect with two codes is refused: the login fails, no code is used")
    func duplicateCode() async throws {
        let receiver = LoopbackRedirectReceiver()
        let page = Locked<FollowingBrowser.Visit?>(nil)
        let used = Locked<[String]>([])
        let error = await #expect(throws: AuthError.self) {
            try await receiver.receiveRedirect(
                expectedState: "expected", provider: "example",
                open: { redirectURI in
                    let items = [("code", "first"), ("code", "second"), ("state", "expected")]
                    let visit = try await Self.visit(Self.redirect(redirectURI, items)).value
                    page.withLock { $0 = visit }
                },
                complete: { outcome, _ in
                    if case .code(let code) = outcome { used.withLock { $0.append(code) } }
                    return ""
                })
        }
        #expect(error?.loginFailedReason == .malformedRedirect)
        #expect(error?.message.contains("'code' more than once") == true, "\(String(describing: error))")
        #expect(used.withLock { $0 }.isEmpty)
        let visit = try #require(page.withLock { $0 })
        #expect(visit.status == 400)
        #expect(visit.body.contains("Sign-in refused"))
    }

    @Test("a cross-site POST, a rebound Host and a foreign Origin are refused, and the real redirect still works")
    func forgedRequests() async throws {
        let receiver = LoopbackRedirectReceiver()
        let statuses = Locked<[Int]>([])
        let code = try await receiver.receiveRedirect(
            expectedState: "s", provider: "example",
            open: { redirectURI in
                let path = redirectURI.path + "?code=evil&state=s"
                let port = redirectURI.port!
                let heads = [
                    "POST \(redirectURI.path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nOrigin: https://evil.example\r\n"
                        + "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 18\r\n\r\ncode=evil&state=s\n",
                    "GET \(path) HTTP/1.1\r\nHost: rebind.attacker.example:\(port)\r\n\r\n",
                    "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nOrigin: https://evil.example\r\n\r\n",
                    "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nOrigin: null\r\n\r\n",
                ]
                for head in heads {
                    let response = try await Self.raw(head, to: redirectURI)
                    statuses.withLock { $0.append(response.status) }
                }
                _ = Self.visit(Self.redirect(redirectURI, [("code", "real"), ("state", "s")]))
            },
            complete: { outcome, _ in
                guard case .code(let code) = outcome else { return "" }
                return code
            })
        #expect(code == "real")
        #expect(statuses.withLock { $0 } == [405, 421, 403, 403])
    }

    @Test("after too many refused requests the login fails as a possible forgery")
    func tooManyRefusals() async throws {
        let receiver = LoopbackRedirectReceiver()
        let completed = Locked(false)
        let error = await #expect(throws: AuthError.self) {
            try await receiver.receiveRedirect(
                expectedState: "expected", provider: "example",
                open: { redirectURI in
                    for index in 0..<12 {
                        _ = Self.visit(Self.redirect(redirectURI, [("code", "c"), ("state", "forged-\(index)")]))
                    }
                },
                complete: { _, _ in completed.withLock { $0 = true } })
        }
        #expect(error?.loginFailedReason == .stateMismatch)
        #expect(error?.message.contains("cross-site request forgery") == true)
        #expect(!completed.withLock { $0 })
    }

    @Test("a redirect saying the person declined reaches the flow, whose error the browser is shown")
    func userDenied() async throws {
        let receiver = LoopbackRedirectReceiver()
        let page = Locked<Task<FollowingBrowser.Visit, any Error>?>(nil)
        let taxonomy = PlainTaxonomy()
        let error = await #expect(throws: AuthError.self) {
            try await receiver.receiveRedirect(
                expectedState: "s", provider: "example",
                open: { redirectURI in
                    page.withLock {
                        $0 = Self.visit(
                            Self.redirect(
                                redirectURI,
                                [
                                    ("error", "access_denied"), ("error_reason", "user_denied"),
                                    ("error_description", "Permissions error"), ("state", "s"),
                                ]))
                    }
                },
                complete: { outcome, _ in
                    guard case .error(let oauthError) = outcome else { return "unexpected code" }
                    throw taxonomy.classifyLoginError(oauthError)
                })
        }
        #expect(error?.category == .userCancelled)
        #expect(error?.loginFailedReason == .userDenied)
        let visit = try await #require(page.withLock { $0 }).value
        #expect(visit.status == 200)
        #expect(visit.body.contains("Sign-in cancelled"))
    }

    @Test("another path gets 404 and the login keeps waiting for the real redirect")
    func wrongPath() async throws {
        let receiver = LoopbackRedirectReceiver(callbackPath: "/oauth/done")
        let pages = Locked<[Task<FollowingBrowser.Visit, any Error>]>([])
        let code = try await receiver.receiveRedirect(
            expectedState: "s", provider: "example",
            open: { redirectURI in
                var other = URLComponents(url: redirectURI, resolvingAgainstBaseURL: false)!
                other.path = "/favicon.ico"
                let stray = try await LoopbackTransport().send(HTTPRequest(url: other.url!))
                #expect(stray.status == 404)
                other.path = "/callback"
                let wrong = try await LoopbackTransport().send(
                    HTTPRequest(url: Self.redirect(other.url!, [("code", "x"), ("state", "s")])))
                #expect(wrong.status == 404)
                pages.withLock {
                    $0.append(Self.visit(Self.redirect(redirectURI, [("code", "right"), ("state", "s")])))
                }
            },
            complete: { outcome, _ in
                guard case .code(let code) = outcome else { return "" }
                return code
            })
        #expect(code == "right")
        #expect(try await pages.withLock { $0[0] }.value.status == 200)
    }

    @Test("no redirect within the timeout fails the login with a timeout error")
    func timeout() async throws {
        let clock = ManualClock()
        let receiver = LoopbackRedirectReceiver(timeout: .seconds(300), clock: clock)
        let port = Locked(0)
        let login = Task {
            try await receiver.receiveRedirect(
                expectedState: "s", provider: "example",
                open: { redirectURI in port.withLock { $0 = redirectURI.port! } },
                complete: { _, _ in "never" })
        }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(299))
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .seconds(1))
        let result = await login.result
        let error = try #require(result.failure as? AuthError)
        #expect(error.loginFailedReason == .timedOut)
        #expect(error.message.contains("300 s"))
        #expect(throws: (any Error).self) { _ = try RawHTTPConnection.connectBlocking(port: port.withLock { $0 }) }
    }

    @Test("a second redirect gets a 'close this window' page and delivers nothing")
    func secondRedirect() async throws {
        let receiver = LoopbackRedirectReceiver()
        let first = Locked<Task<FollowingBrowser.Visit, any Error>?>(nil)
        let secondPage = Locked<FollowingBrowser.Visit?>(nil)
        let completions = Locked<[String]>([])
        let code = try await receiver.receiveRedirect(
            expectedState: "s", provider: "example",
            open: { redirectURI in
                first.withLock { $0 = Self.visit(Self.redirect(redirectURI, [("code", "one"), ("state", "s")])) }
            },
            complete: { outcome, redirectURI in
                guard case .code(let code) = outcome else { return "" }
                completions.withLock { $0.append(code) }
                // While the first is being exchanged, the same redirect comes again with
                // another code, and a forged one too: neither counts.
                for items in [[("code", "two"), ("state", "s")], [("code", "three"), ("state", "forged")]] {
                    let response = try await LoopbackTransport().send(
                        HTTPRequest(url: Self.redirect(redirectURI, items)))
                    secondPage.withLock { $0 = FollowingBrowser.Visit(url: redirectURI, response: response) }
                    #expect(response.status == 200)
                    #expect(String(decoding: response.body, as: UTF8.self).contains("already finished"))
                }
                return code
            })
        #expect(code == "one")
        #expect(completions.withLock { $0 } == ["one"])
        #expect(try await first.withLock { $0! }.value.body.contains("Signed in"))
        #expect(secondPage.withLock { $0 }?.body.contains("You can close this window") == true)
    }

    @Test("cancelling the login task stops waiting and the listener")
    func cancellation() async throws {
        let receiver = LoopbackRedirectReceiver()
        let opened = Latch()
        let port = Locked(0)
        let login = Task {
            try await receiver.receiveRedirect(
                expectedState: "s", provider: "example",
                open: { redirectURI in
                    port.withLock { $0 = redirectURI.port! }
                    opened.open()
                },
                complete: { _, _ in "never" })
        }
        await opened.wait()
        login.cancel()
        let result = await login.result
        #expect(result.failure is CancellationError)
        #expect(throws: (any Error).self) { _ = try RawHTTPConnection.connectBlocking(port: port.withLock { $0 }) }
    }
}
