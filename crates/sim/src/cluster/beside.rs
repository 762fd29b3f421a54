//! Work beside the cluster: one long-lived thread runs each piece of work handed to it, one
//! piece at a time, while the caller goes on; the caller waits for the piece before it changes
//! what the piece reads.
//!
//! The thread is kept rather than started for every piece. A fresh thread starts with an
//! empty allocator heap, so the megabytes a view's compile allocates come from pages the
//! kernel has to fault in and zero again, once per planning round and per re-check.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::{self, JoinHandle};

type Job = Box<dyn FnOnce() + Send>;

/// The thread working beside the cluster, started at the first piece of work. A copy starts
/// with none, and waits for nothing of the original's.
#[derive(Debug, Default)]
pub(super) struct Beside {
    worker: Option<Worker>,
    /// A piece was handed over and not yet waited for.
    running: bool,
}

impl Clone for Beside {
    fn clone(&self) -> Self {
        Beside::default()
    }
}

impl Beside {
    /// Hands `job` to the thread, once the piece before it has ended. Where no thread can be
    /// started, `job` runs here.
    pub(super) fn run(&mut self, job: impl FnOnce() + Send + 'static) {
        self.finish();
        if self.worker.is_none() {
            self.worker = Worker::start();
        }
        let Some(w) = &self.worker else {
            return job();
        };
        match w.jobs.send(Box::new(job)) {
            Ok(()) => self.running = true,
            // The thread is gone: the job comes back, and runs here.
            Err(back) => {
                self.worker = None;
                (back.0)()
            }
        }
    }

    /// Waits for the piece handed over last, and passes its panic on.
    pub(super) fn finish(&mut self) {
        if !std::mem::take(&mut self.running) {
            return;
        }
        let Some(w) = &self.worker else { return };
        match w.done.recv() {
            Ok(Ok(())) => {}
            Ok(Err(panic)) => resume_unwind(panic),
            // The thread ended without an answer: there is nothing left to wait for.
            Err(_) => self.worker = None,
        }
    }
}

impl Drop for Beside {
    fn drop(&mut self) {
        // Not while unwinding: a second panic would abort.
        if !std::thread::panicking() {
            self.finish();
        }
    }
}

#[derive(Debug)]
struct Worker {
    /// Closed when the worker is dropped, which ends the thread.
    jobs: Sender<Job>,
    done: Receiver<thread::Result<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    fn start() -> Option<Worker> {
        let (jobs, queue) = channel::<Job>();
        let (answer, done) = channel();
        let thread = thread::Builder::new()
            .name("nodewright-beside".into())
            .spawn(move || {
                for job in queue {
                    // The job, and what it holds, is dropped before the answer goes back.
                    let result = catch_unwind(AssertUnwindSafe(job));
                    if answer.send(result).is_err() {
                        break;
                    }
                }
            })
            .ok()?;
        Some(Worker {
            jobs,
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Swapping in a sender of a queue no one reads drops the real one, closing its queue.
        drop(std::mem::replace(&mut self.jobs, channel().0));
        if let Some(t) = self.thread.take() {
            // A piece still running ends first; its panic, if any, was already passed on
            // or is dropped with the worker.
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn pieces_run_in_turn_on_one_thread_and_finish_waits_for_the_last() {
        let mut b = Beside::default();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        for i in 0..5 {
            let seen = Arc::clone(&seen);
            b.run(move || {
                std::thread::sleep(std::time::Duration::from_millis(2));
                seen.lock().unwrap().push((i, std::thread::current().id()));
            });
        }
        b.finish();
        let seen = seen.lock().unwrap();
        assert_eq!(
            seen.iter().map(|s| s.0).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        assert!(
            seen.iter().all(|s| s.1 == seen[0].1),
            "one thread: {seen:?}"
        );
        assert_ne!(seen[0].1, std::thread::current().id());
    }

    /// Hands `b` a piece that counts once, waits for it, and returns the counter.
    fn counted_piece(b: &mut Beside) -> Arc<AtomicUsize> {
        let count = Arc::new(AtomicUsize::new(0));
        let mine = Arc::clone(&count);
        b.run(move || {
            mine.fetch_add(1, Ordering::SeqCst);
        });
        b.finish();
        count
    }

    #[test]
    fn what_a_piece_holds_is_dropped_before_it_counts_as_done() {
        let held = counted_piece(&mut Beside::default());
        assert_eq!(held.load(Ordering::SeqCst), 1);
        assert_eq!(Arc::strong_count(&held), 1, "the job's handle outlived it");
    }

    #[test]
    fn a_panic_in_a_piece_reaches_the_waiter_and_the_thread_goes_on() {
        let mut b = Beside::default();
        b.run(|| panic!("piece failed"));
        let caught = catch_unwind(AssertUnwindSafe(|| b.finish()));
        let message = caught.expect_err("the panic is passed on");
        assert_eq!(message.downcast_ref::<&str>(), Some(&"piece failed"));
        assert_eq!(counted_piece(&mut b).load(Ordering::SeqCst), 1);
    }
}
