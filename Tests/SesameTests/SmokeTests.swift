import Testing
@testable import Sesame

@Test func builds() { #expect(ProviderID("x").rawValue == "x") }
