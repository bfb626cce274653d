//! A small thread pool for the kernels: static, deterministic splits of output columns or heads.
//!
//! Work is always cut into contiguous parts whose bounds depend only on the problem size and the
//! thread count, and every output element is computed by exactly one part with the same
//! instruction sequence whatever the split: results are bitwise identical for any thread count.
//! With one thread everything runs inline on the caller; otherwise the caller runs the first part
//! itself and `threads - 1` rayon workers take the rest.

use std::ops::Range;

use crate::error::{Error, invalid};

/// The threads a kernel call may use.
pub struct ThreadPool {
    threads: usize,
    pool: Option<rayon::ThreadPool>,
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
        let pool = if threads == 1 {
            None
        } else {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads - 1)
                .thread_name(|i| format!("genai-cpu-{i}"))
                .build()
                .map_err(|e| Error::ThreadPool(e.to_string()))?;
            Some(pool)
        };
        Ok(Self { threads, pool })
    }

    /// A pool that runs everything inline on the calling thread.
    pub fn single() -> Self {
        Self {
            threads: 1,
            pool: None,
        }
    }

    /// How many threads kernel calls use.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f(index, item)` for every item, concurrently (at most `threads` at once); returns
    /// when all are done. Item 0 runs on the calling thread. A panic in `f` is propagated.
    pub fn run_each<T: Send>(&self, items: Vec<T>, f: impl Fn(usize, T) + Sync) {
        match &self.pool {
            Some(pool) if items.len() > 1 => {
                let f = &f;
                pool.in_place_scope(|scope| {
                    let mut items = items.into_iter().enumerate();
                    let first = items.next();
                    for (i, item) in items {
                        scope.spawn(move |_| f(i, item));
                    }
                    if let Some((i, item)) = first {
                        f(i, item);
                    }
                });
            }
            _ => {
                for (i, item) in items.into_iter().enumerate() {
                    f(i, item);
                }
            }
        }
    }

    /// Splits `0..len` into at most `threads` contiguous ranges (see [`split_bounds`]) and runs
    /// `f` on each, concurrently.
    pub fn for_ranges(&self, len: usize, align: usize, f: impl Fn(Range<usize>) + Sync) {
        let bounds = split_bounds(len, self.threads, align);
        let ranges: Vec<Range<usize>> = bounds.windows(2).map(|w| w[0]..w[1]).collect();
        self.run_each(ranges, |_, r| f(r));
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
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn bounds_cover_and_align() {
        for len in [0usize, 1, 3, 15, 16, 17, 100, 4864] {
            for parts in 1..6 {
                for align in [1usize, 4, 16] {
                    let b = split_bounds(len, parts, align);
                    assert_eq!(b[0], 0);
                    assert_eq!(*b.last().unwrap(), len);
                    assert!(b.len() - 1 <= parts.max(1));
                    for w in b.windows(2) {
                        assert!(w[0] < w[1] || len == 0);
                    }
                    for &x in &b[1..b.len() - 1] {
                        assert_eq!(x % align, 0, "len {len} parts {parts} align {align}: {b:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn run_each_runs_everything_once() {
        for threads in [1, 2, 3] {
            let pool = ThreadPool::new(threads).unwrap();
            let hits: Vec<AtomicUsize> = (0..7).map(|_| AtomicUsize::new(0)).collect();
            pool.run_each((0..7).collect(), |i, item: usize| {
                assert_eq!(i, item);
                hits[item].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
        assert!(ThreadPool::new(0).is_err());
    }

    #[test]
    fn columns_split_disjointly() {
        let mut buf: Vec<f32> = (0..3 * 10).map(|v| v as f32).collect();
        let bounds = split_bounds(10, 3, 4);
        let pieces = split_columns(&mut buf, 3, 10, &bounds);
        assert_eq!(pieces.len(), bounds.len() - 1);
        for (p, rows) in pieces.iter().enumerate() {
            assert_eq!(rows.len(), 3);
            for (r, piece) in rows.iter().enumerate() {
                assert_eq!(piece.len(), bounds[p + 1] - bounds[p]);
                assert_eq!(piece[0], (r * 10 + bounds[p]) as f32);
            }
        }
    }
}
