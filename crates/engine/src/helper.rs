//! A second core for the work of one scheduling cycle: [`join`] runs one closure on a helper
//! thread while the caller runs another, and returns when both are done. A cycle is tens of
//! microseconds, far less than starting a thread, so the helper is started once per process
//! and waits for work by spinning for a while, then sleeping.
//!
//! The split never changes a result: callers give each side its own part of the work and
//! merge the parts in a fixed order. When the machine has one core, or another caller is
//! using the helper, both closures run on the caller's thread, one after the other; so does
//! a helper's part it has not started by the time the caller's part is done (a sleeping or
//! descheduled helper never delays the caller by more than running both parts itself).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError, TryLockError};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long the helper spins for the next job before it sleeps: longer than the gap
/// between the cycles of a busy scheduler, short enough not to hold a core when idle.
const SPIN: Duration = Duration::from_micros(200);

const IDLE: u8 = 0;
/// A job waits in the slot for the first side to claim it.
const POSTED: u8 = 1;
/// The helper claimed it.
const RUNNING: u8 = 2;
/// The caller took it back (the helper had not claimed it when the caller's side was done).
const TAKEN: u8 = 3;
const DONE: u8 = 4;

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

/// The helper thread: runs each posted job it claims before the caller takes it back.
fn serve(helper: &Helper) {
    loop {
        let mut since: Option<Instant> = None;
        let mut spins = 0u32;
        loop {
            if helper.state.load(Ordering::Acquire) == POSTED
                && helper
                    .state
                    .compare_exchange(POSTED, RUNNING, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                break;
            }
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
/// borrows from the caller's frame); a job the helper has not claimed yet is taken back and
/// run here instead.
struct Finish<'a>(&'a Helper);

impl Finish<'_> {
    /// Runs the job here if the helper has not claimed it; whether it did.
    fn take_back(&self) -> bool {
        let helper = self.0;
        if helper
            .state
            .compare_exchange(POSTED, TAKEN, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        let job = helper
            .job
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(job) = job {
            job();
        }
        true
    }
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        let state = &self.0.state;
        // Unclaimed while the caller's side unwinds: taken back, and dropped unrun below.
        if state
            .compare_exchange(POSTED, TAKEN, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            let mut spins = 0u32;
            while state.load(Ordering::Acquire) == RUNNING {
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(1024) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        self.0
            .job
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        state.store(IDLE, Ordering::Release);
    }
}

/// Which side of a [`join`] finished last: a caller that splits work again can move some
/// of it to the other side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Last {
    /// The helper finished first (or both ran here, one after the other).
    Caller,
    /// The caller waited for the helper, or ran its part itself because the helper had
    /// not started it.
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
    // SAFETY: the job only outlives its borrows in type: before this frame, and so anything
    // the job borrows, can go away, `Finish` below either waits until the helper has run it
    // or takes it back from the slot (also when `b` unwinds).
    let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
    *helper.job.lock().unwrap_or_else(PoisonError::into_inner) = Some(job);
    helper.panicked.store(false, Ordering::Relaxed);
    helper.state.store(POSTED, Ordering::Release);
    helper.thread.unpark();
    let finish = Finish(helper);
    let result = b();
    let last = if finish.take_back() || helper.state.load(Ordering::Acquire) != DONE {
        Last::Helper
    } else {
        Last::Caller
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
