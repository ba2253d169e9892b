import Sesame

/// The cross-process refresh lock, under the name it had before it moved to the core as
/// `Sesame.RefreshLock` (every provider's session uses it now).
public typealias TokenRefreshLock = RefreshLock
