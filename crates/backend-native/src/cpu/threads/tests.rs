//! Thread pool tests: splits, every part run once, panics propagated, concurrent callers.

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
        for round in 0..200 {
            let n = 1 + round % 7;
            let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            pool.run_each((0..n).collect(), |i, item: usize| {
                assert_eq!(i, item);
                hits[item].fetch_add(1, Ordering::Relaxed);
            });
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "round {round}"
            );
        }
    }
    assert!(ThreadPool::new(0).is_err());
    let pool = ThreadPool::new(3).unwrap();
    assert_eq!(pool.parts_for(10, 100), 1);
    assert_eq!(pool.parts_for(250, 100), 2);
    assert_eq!(pool.parts_for(1000, 100), 3);
    assert_eq!(pool.parts_for(1000, 0), 3);
}

#[test]
fn for_parts_runs_every_part_once() {
    for threads in [1, 2, 3] {
        let pool = ThreadPool::new(threads).unwrap();
        for parts in 0..8 {
            let hits: Vec<AtomicUsize> = (0..parts).map(|_| AtomicUsize::new(0)).collect();
            pool.for_parts(parts, |p| {
                hits[p].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
    }
}

#[test]
fn workers_wake_after_parking() {
    let pool = ThreadPool::new(2).unwrap();
    let count = AtomicUsize::new(0);
    for _ in 0..3 {
        std::thread::sleep(SPIN * 3);
        pool.run_each(vec![(), (), ()], |_, ()| {
            count.fetch_add(1, Ordering::Relaxed);
        });
    }
    assert_eq!(count.load(Ordering::Relaxed), 9);
}

#[test]
fn panics_propagate_and_the_pool_survives() {
    let pool = ThreadPool::new(2).unwrap();
    for bad in [0usize, 1] {
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
            pool.run_each(vec![0usize, 1], |i, _| {
                if i == bad {
                    panic!("part {i} fails");
                }
            })
        }));
        assert!(r.is_err(), "panic in part {bad} was lost");
    }
    let count = AtomicUsize::new(0);
    pool.run_each(vec![(), ()], |_, ()| {
        count.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(count.load(Ordering::Relaxed), 2);
}

#[test]
fn concurrent_and_nested_callers_finish() {
    let pool = ThreadPool::new(2).unwrap();
    let total = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                for _ in 0..100 {
                    pool.run_each(vec![1usize, 2, 3], |_, v| {
                        // A nested call on the same pool runs inline.
                        pool.run_each(vec![v, v], |_, w| {
                            total.fetch_add(w, Ordering::Relaxed);
                        });
                    });
                }
            });
        }
    });
    assert_eq!(total.load(Ordering::Relaxed), 3 * 100 * 12);
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

#[test]
fn pool_is_shareable() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<ThreadPool>();
    let pool = std::sync::Arc::new(ThreadPool::new(2).unwrap());
    let p2 = std::sync::Arc::clone(&pool);
    let n = std::thread::spawn(move || {
        let hits = AtomicUsize::new(0);
        p2.run_each(vec![(); 4], |_, ()| {
            hits.fetch_add(1, Ordering::Relaxed);
        });
        hits.load(Ordering::Relaxed)
    })
    .join()
    .unwrap();
    assert_eq!(n, 4);
    drop(pool);
}
