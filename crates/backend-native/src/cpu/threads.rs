//! A small thread pool for the kernels: static, deterministic splits of output columns or heads.
//!
//! Work is always cut into contiguous parts whose bounds depend only on the problem size and the
//! number of parts, and every output element is computed by exactly one part with the same
//! instruction sequence whatever the split: results are bitwise identical for any thread count.
//!
//! With one thread everything runs inline on the caller. Otherwise `threads - 1` workers wait
//! for jobs by spinning for a while (a decode step issues a kernel call every few microseconds,
//! and waking a sleeping thread costs more than that) before parking on a condition variable;
//! the caller runs part 0 itself and spins until the workers are done. A hand-off costs about a
//! microsecond while the workers spin.

use std::any::Any;
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, invalid};

/// How long an idle worker spins before parking.
const SPIN: Duration = Duration::from_micros(200);

/// The threads a kernel call may use.
pub struct ThreadPool {
    threads: usize,
    shared: Option<Arc<Shared>>,
    workers: Vec<JoinHandle<()>>,
    /// Held while a job runs on the workers.
    run_lock: Mutex<()>,
}

/// A job: parts `0..parts` of `f`, part `p` run by participant `p % threads`.
#[derive(Clone, Copy)]
struct Job {
    f: *const (dyn Fn(usize) + Sync),
    parts: usize,
}

// SAFETY: `f` points to a `Sync` closure that `ThreadPool::run` keeps alive (and does not
// return) until every worker has finished with it; sending the pointer is sending `&f`.
unsafe impl Send for Job {}

struct Shared {
    threads: usize,
    /// Bumped (SeqCst) once per job and at shutdown.
    epoch: AtomicUsize,
    job: Mutex<Option<Job>>,
    /// Workers that have not finished the current job.
    remaining: AtomicUsize,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    shutdown: AtomicBool,
    /// Workers parked on `wake` (changed under `park`).
    sleepers: AtomicUsize,
    park: Mutex<()>,
    wake: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool")
            .field("threads", &self.threads)
            .finish()
    }
}

impl ThreadPool {
    /// A pool that runs kernels on `threads` threads (the caller plus `threads - 1` workers).
    /// `threads == 1` runs everything inline.
    pub fn new(threads: usize) -> Result<Self, Error> {
        if threads == 0 {
            return Err(invalid("threads", "must be at least 1"));
        }
        if threads == 1 {
            return Ok(Self::single());
        }
        let shared = Arc::new(Shared {
            threads,
            epoch: AtomicUsize::new(0),
            job: Mutex::new(None),
            remaining: AtomicUsize::new(0),
            panic: Mutex::new(None),
            shutdown: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            park: Mutex::new(()),
            wake: Condvar::new(),
        });
        let mut workers = Vec::with_capacity(threads - 1);
        for index in 1..threads {
            let s = Arc::clone(&shared);
            let handle = std::thread::Builder::new()
                .name(format!("genai-cpu-{index}"))
                .spawn(move || worker(&s, index))
                .map_err(|e| Error::ThreadPool(e.to_string()))?;
            workers.push(handle);
        }
        Ok(Self {
            threads,
            shared: Some(shared),
            workers,
            run_lock: Mutex::new(()),
        })
    }

    /// A pool that runs everything inline on the calling thread.
    pub fn single() -> Self {
        Self {
            threads: 1,
            shared: None,
            workers: Vec::new(),
            run_lock: Mutex::new(()),
        }
    }

    /// How many threads kernel calls use.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// How many parts a job of `work` units should be cut into: at most one per thread and at
    /// least `min_per_part` units each (handing a part to another thread is not free). The
    /// split never changes results.
    pub fn parts_for(&self, work: usize, min_per_part: usize) -> usize {
        self.threads.min(work / min_per_part.max(1)).max(1)
    }

    /// Runs `f(index, item)` for every item, concurrently (at most `threads` at once); returns
    /// when all are done. Item 0 runs on the calling thread. A panic in `f` is propagated.
    pub fn run_each<T: Send>(&self, items: Vec<T>, f: impl Fn(usize, T) + Sync) {
        match &self.shared {
            Some(shared) if items.len() > 1 => {
                let slots: Vec<Mutex<Option<T>>> =
                    items.into_iter().map(|t| Mutex::new(Some(t))).collect();
                let job = |i: usize| {
                    if let Some(item) = lock(&slots[i]).take() {
                        f(i, item);
                    }
                };
                self.run(shared, slots.len(), &job);
            }
            _ => {
                for (i, item) in items.into_iter().enumerate() {
                    f(i, item);
                }
            }
        }
    }

    /// Runs `f(part)` for parts `0..parts`, concurrently (part `p` on participant `p %
    /// threads`, part 0 on the calling thread); returns when all are done. A panic in `f` is
    /// propagated.
    pub fn for_parts(&self, parts: usize, f: impl Fn(usize) + Sync) {
        match &self.shared {
            Some(shared) if parts > 1 => self.run(shared, parts, &f),
            _ => (0..parts).for_each(f),
        }
    }

    /// Splits `0..len` into at most `threads` contiguous ranges (see [`split_bounds`]) and runs
    /// `f` on each, concurrently.
    pub fn for_ranges(&self, len: usize, align: usize, f: impl Fn(Range<usize>) + Sync) {
        let bounds = split_bounds(len, self.threads, align);
        let ranges: Vec<Range<usize>> = bounds.windows(2).map(|w| w[0]..w[1]).collect();
        self.run_each(ranges, |_, r| f(r));
    }

    /// Runs parts `0..parts` of `f` on the caller and the workers; returns when all are done.
    /// While another job holds the pool (a concurrent caller, or a job calling back into its own
    /// pool) the parts run inline instead: same results, no deadlock.
    fn run(&self, shared: &Shared, parts: usize, f: &(dyn Fn(usize) + Sync)) {
        let _serial = match self.run_lock.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return run_parts(f, 0, parts, 1),
        };
        let f: *const (dyn Fn(usize) + Sync + '_) = f;
        // SAFETY: only the lifetime is erased. This function does not return (nor unwind)
        // before `remaining` is back to 0, i.e. before every worker is done with `f`.
        let f: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(f) };
        *lock(&shared.job) = Some(Job { f, parts });
        shared.remaining.store(shared.threads - 1, Ordering::SeqCst);
        shared.epoch.fetch_add(1, Ordering::SeqCst);
        if shared.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = lock(&shared.park);
            shared.wake.notify_all();
        }
        // SAFETY: `f` is alive for this whole call (see above).
        let f = unsafe { &*f };
        let mine = catch_unwind(AssertUnwindSafe(|| run_parts(f, 0, parts, shared.threads)));
        while shared.remaining.load(Ordering::Acquire) != 0 {
            std::hint::spin_loop();
        }
        if let Err(p) = mine {
            resume_unwind(p);
        }
        if let Some(p) = lock(&shared.panic).take() {
            resume_unwind(p);
        }
    }
}

fn run_parts(f: &(dyn Fn(usize) + Sync), first: usize, parts: usize, step: usize) {
    for p in (first..parts).step_by(step) {
        f(p);
    }
}

fn worker(s: &Shared, index: usize) {
    // The epoch starts at 0 and no job completes without this worker, so 0 is the last one seen
    // even if a job was published before this thread started.
    let mut seen = 0;
    loop {
        // Spin, then park, until the epoch moves.
        let start = Instant::now();
        let mut spins = 0u32;
        while s.epoch.load(Ordering::SeqCst) == seen {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) && start.elapsed() > SPIN {
                let mut g = lock(&s.park);
                s.sleepers.fetch_add(1, Ordering::SeqCst);
                while s.epoch.load(Ordering::SeqCst) == seen {
                    g = s.wake.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                s.sleepers.fetch_sub(1, Ordering::SeqCst);
            }
        }
        seen = s.epoch.load(Ordering::SeqCst);
        if s.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let job = *lock(&s.job);
        if let Some(job) = job {
            // SAFETY: the caller keeps the closure alive until `remaining` reaches 0, which
            // happens only after this use (the decrement below).
            let f = unsafe { &*job.f };
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| {
                run_parts(f, index, job.parts, s.threads)
            })) {
                lock(&s.panic).get_or_insert(p);
            }
        }
        s.remaining.fetch_sub(1, Ordering::Release);
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        if let Some(s) = &self.shared {
            s.shutdown.store(true, Ordering::SeqCst);
            s.epoch.fetch_add(1, Ordering::SeqCst);
            let _g = lock(&s.park);
            s.wake.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Bounds `[0, b1, ..., len]` cutting `0..len` into at most `parts` non-empty ranges of nearly
/// equal size whose inner bounds are multiples of `align` (`align == 0` is taken as 1).
pub fn split_bounds(len: usize, parts: usize, align: usize) -> Vec<usize> {
    if len == 0 {
        return vec![0, 0];
    }
    let align = align.max(1);
    let units = len.div_ceil(align);
    let parts = parts.clamp(1, units);
    // floor(units * p / parts) strictly increases for parts <= units, and stays below units, so
    // every inner bound is aligned, increasing and below len.
    let mut bounds: Vec<usize> = (0..parts).map(|p| units * p / parts * align).collect();
    bounds.push(len);
    bounds
}

/// Cuts a row-major `[rows, row_len]` buffer into column pieces: for each range
/// `bounds[i]..bounds[i+1]`, the `rows` sub-slices `buf[r * row_len + bounds[i]..][..width]`.
pub(crate) fn split_columns<'a>(
    buf: &'a mut [f32],
    rows: usize,
    row_len: usize,
    bounds: &[usize],
) -> Vec<Vec<&'a mut [f32]>> {
    let parts = bounds.len().saturating_sub(1);
    let mut out: Vec<Vec<&'a mut [f32]>> = (0..parts).map(|_| Vec::with_capacity(rows)).collect();
    for row in buf.chunks_mut(row_len.max(1)).take(rows) {
        let mut rest = row;
        let mut at = 0;
        for (p, piece_list) in out.iter_mut().enumerate() {
            let (piece, tail) = rest.split_at_mut(bounds[p + 1] - at);
            at = bounds[p + 1];
            rest = tail;
            piece_list.push(piece);
        }
    }
    out
}

#[cfg(test)]
mod tests;
