import CCrypto
import Foundation
import Testing

@testable import Sesame

/// `releaseThreadLibraryState()`: what `onOwnThread`'s threads (and `sesame status`'s libcurl
/// loader) call before they say they are done, so that OpenSSL's per-thread state is freed while
/// the thread is still one LeakSanitizer knows, not in an exit the process may not wait for.
@Suite("A thread's OpenSSL state is let go of before the thread says it is done")
struct ThreadLibraryStateTests {
    /// Pushes an error onto this thread's OpenSSL error queue (a key type OpenSSL does not have).
    private static func pushOpenSSLError() {
        if let context = sesame_EVP_PKEY_CTX_new_from_name(nil, "no-such-key-type", nil) {
            sesame_EVP_PKEY_CTX_free(context)
        }
    }

    @Test("the thread's error queue is freed: an error pushed before is gone after, and libcrypto still works")
    func errorQueueFreed() async {
        let (kept, afterRelease, digest) = await onOwnThread { () -> (UInt, UInt, Data) in
            // Control: without the release, a pushed error stays on the thread's queue.
            Self.pushOpenSSLError()
            let kept = sesame_ERR_get_error()
            Self.pushOpenSSLError()
            releaseThreadLibraryState()
            let afterRelease = sesame_ERR_get_error()
            return (kept, afterRelease, Crypto.sha256(Data("abc".utf8)))
        }
        #expect(kept != 0, "an unknown key type pushed no OpenSSL error, so this test shows nothing")
        #expect(afterRelease == 0, "the thread's OpenSSL error queue was not freed")
        #expect(
            digest.map { String(format: "%02x", $0) }.joined()
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}
