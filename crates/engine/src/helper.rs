//! A second core for the work of one scheduling cycle: [`join`] runs one closure on a helper
//! thread while the caller runs another, and returns when both are done. A cycle is tens of
//! microseconds, far less than starting a thread, so the helper is started once per process
//! and waits for work by spinning for a while, then sleeping.
//!
//! The split never changes a result: callers give each side its own part of the work and
//! merge the parts in a fixed order. When the machine has one core, or another caller is
//! using the helper, both closures run on the caller's thread, one after the other.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError, TryLockError};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long the helper spins for the next job before it sleeps: longer than the gap
/// between the cycles of a busy scheduler, short enough not to hold a core when idle.
const SPIN: Duration = Duration::from_micros(200);

const IDLE: u8 = 0;
const POSTED: u8 = 1;
const DONE: u8 = 2;

type Job = Box<dyn FnOnce() + Send + 'static>;

struct Helper {
    /// Held by the one caller whose job is in flight.
    caller: Mutex<()>,
    job: Mutex<Option<Job>>,
    state: AtomicU8,
    panicked: AtomicBool,
    thread: Thread,
}

/// The process's helper, started on first use; `None` with a single core.
fn helper() -> Option<&'static Helper> {
    static HELPER: OnceLock<Option<&'static Helper>> = OnceLock::new();
    *HELPER.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cores < 2 {
            return None;
        }
        let (tx, rx) = std::sync::mpsc::channel::<&'static Helper>();
        let spawned = std::thread::Builder::new()
            .name("lockstep-helper".into())
            .spawn(move || {
                let helper: &'static Helper = Box::leak(Box::new(Helper {
                    caller: Mutex::new(()),
                    job: Mutex::new(None),
                    state: AtomicU8::new(IDLE),
                    panicked: AtomicBool::new(false),
                    thread: std::thread::current(),
                }));
                if tx.send(helper).is_ok() {
                    serve(helper);
                }
            });
        spawned.ok().and_then(|_| rx.recv().ok())
    })
}

/// The helper thread: runs each posted job, forever.
fn serve(helper: &Helper) {
    loop {
        let mut since: Option<Instant> = None;
        let mut spins = 0u32;
        while helper.state.load(Ordering::Acquire) != POSTED {
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) {
                std::hint::spin_loop();
                continue;
            }
            let started = *since.get_or_insert_with(Instant::now);
            if started.elapsed() > SPIN {
                // A job posted after this check unparks the thread, so the park returns.
                std::thread::park();
            }
        }
        let job = helper
            .job
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let ok = job.is_none_or(|job| catch_unwind(AssertUnwindSafe(job)).is_ok());
        helper.panicked.store(!ok, Ordering::Relaxed);
        helper.state.store(DONE, Ordering::Release);
    }
}

/// Waits for the helper's job to finish, also when the caller's side panics (the job
/// borrows from the caller's frame).
struct Finish<'a>(&'a Helper);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        let mut spins = 0u32;
        while self.0.state.load(Ordering::Acquire) != DONE {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        self.0.state.store(IDLE, Ordering::Relaxed);
    }
}

/// Which side of a [`join`] finished last: a caller that splits work again can move some
/// of it to the other side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Last {
    /// The helper finished first (or both ran here, one after the other).
    Caller,
    /// The caller waited for the helper.
    Helper,
}

/// Runs `a` on the helper thread and `b` on this one; returns `b`'s result once both are
/// done, and which side finished last. A panic in either is raised here.
pub fn join<A, B, R>(a: A, b: B) -> (R, Last)
where
    A: FnOnce() + Send,
    B: FnOnce() -> R,
{
    let Some(helper) = helper() else {
        a();
        return (b(), Last::Caller);
    };
    // A caller that panicked poisons the lock but leaves the helper idle.
    let _caller = match helper.caller.try_lock() {
        Ok(guard) => guard,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => {
            a();
            return (b(), Last::Caller);
        }
    };
    let job: Box<dyn FnOnce() + Send + '_> = Box::new(a);
    // SAFETY: the job only outlives its borrows in type: `Finish` below waits until the
    // helper has run it (also when `b` unwinds), before this frame, and so anything the job
    // borrows, can go away.
    let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
    *helper.job.lock().unwrap_or_else(PoisonError::into_inner) = Some(job);
    helper.state.store(POSTED, Ordering::Release);
    helper.thread.unpark();
    let finish = Finish(helper);
    let result = b();
    let last = if helper.state.load(Ordering::Acquire) == DONE {
        Last::Caller
    } else {
        Last::Helper
    };
    drop(finish);
    if helper.panicked.load(Ordering::Relaxed) {
        panic!("the helper thread's part of a scheduling cycle panicked");
    }
    (result, last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sides_run_and_their_results_are_kept() {
        for round in 0..1000u64 {
            let mut left = Vec::new();
            let (right, _) = join(
                || left.extend((0..100).map(|i| i * round)),
                || (100..200).map(|i| i * round).collect::<Vec<_>>(),
            );
            assert_eq!(left, (0..100).map(|i| i * round).collect::<Vec<_>>());
            assert_eq!(right, (100..200).map(|i| i * round).collect::<Vec<_>>());
        }
    }

    #[test]
    fn callers_on_several_threads_share_the_helper() {
        std::thread::scope(|s| {
            for t in 0..4u64 {
                s.spawn(move || {
                    for round in 0..500u64 {
                        let mut left = 0;
                        let (right, _) = join(|| left = t * round, || t + round);
                        assert_eq!((left, right), (t * round, t + round));
                    }
                });
            }
        });
    }

    #[test]
    fn a_panic_on_the_helper_reaches_the_caller_and_the_helper_goes_on() {
        let caught = catch_unwind(|| join(|| panic!("boom"), || 1));
        assert!(caught.is_err());
        let mut x = 0;
        assert_eq!(join(|| x = 2, || 3).0, 3);
        assert_eq!(x, 2);
    }
}
