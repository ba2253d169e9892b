/// The task executor the current task prefers (SE-0417), if it has one.
///
/// Child tasks (`async let`, task groups) keep their parent's preference; unstructured tasks do
/// not. A type that starts a `Task {}` on its caller's behalf (to share one read among
/// concurrent callers, or to race work against a deadline) passes this as the new task's
/// `executorPreference`, so that a program running its work on an executor of its own (the
/// `sesame` command runs on its main thread) keeps that work there, rather than starting
/// threads of the global pool for it. With no preference, this is `nil` and nothing changes.
package var currentTaskExecutorPreference: (any TaskExecutor)? {
    withUnsafeCurrentTask { $0?.unownedTaskExecutor?.asTaskExecutor() }
}
