//! Whether a compile may split its work onto threads of its own.
//!
//! A compile started beside a caller that keeps working (a view's compile during a planning
//! round) already shares the cores with it: a thread of its own only competes for them, and
//! costs a thread start besides. Such work runs under [`alone`]; the answer is the same.

use std::cell::Cell;

thread_local! {
    static ALONE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with no compile in it splitting work onto other threads.
pub fn alone<R>(f: impl FnOnce() -> R) -> R {
    let before = ALONE.with(|a| a.replace(true));
    // Reset on unwinding too: the thread may go on to other work.
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            ALONE.with(|a| a.set(self.0));
        }
    }
    let _reset = Reset(before);
    f()
}

/// Whether work may go to a thread of its own here.
pub(crate) fn may_split() -> bool {
    !ALONE.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_run_alone_may_not_split_and_the_thread_may_again_after() {
        assert!(may_split());
        let inside = alone(|| (may_split(), alone(may_split), may_split()));
        assert_eq!(inside, (false, false, false));
        assert!(may_split());
        // Other threads are not affected.
        alone(|| assert!(std::thread::scope(|s| s.spawn(may_split).join().unwrap())));
    }

    #[test]
    fn a_panic_inside_leaves_the_thread_free_to_split() {
        let caught = std::panic::catch_unwind(|| alone(|| panic!("compile failed")));
        assert!(caught.is_err());
        assert!(may_split());
    }
}
