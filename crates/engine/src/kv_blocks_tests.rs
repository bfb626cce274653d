//! Tests of the KV block pool and tables: growth, sharing, copy on write, running out.

use super::*;

fn pool(blocks: usize, bs: usize) -> BlockPool {
    BlockPool::new(blocks, bs).expect("a valid pool")
}

#[test]
fn a_sequence_takes_blocks_as_it_grows_and_gives_them_back() {
    let mut p = pool(4, 16);
    let mut t = BlockTable::new();
    assert_eq!(t.append(&mut p, 1).unwrap(), None);
    assert_eq!((t.len(), t.blocks().len(), p.free()), (1, 1, 3));
    t.append(&mut p, 15).unwrap();
    assert_eq!((t.blocks().len(), p.free()), (1, 3));
    t.append(&mut p, 1).unwrap();
    assert_eq!((t.len(), t.blocks().len(), p.free()), (17, 2, 2));
    assert_eq!(t.locate(16, 16), Some((t.blocks()[1], 0)));
    assert_eq!(t.locate(15, 16), Some((t.blocks()[0], 15)));
    assert_eq!(t.locate(32, 16), None);
    t.truncate(&mut p, 16);
    assert_eq!((t.len(), t.blocks().len(), p.free()), (16, 1, 3));
    t.clear(&mut p);
    assert_eq!((t.len(), p.free()), (0, 4));
}

#[test]
fn running_out_changes_nothing_and_says_what_was_needed() {
    let mut p = pool(2, 4);
    let mut a = BlockTable::new();
    a.append(&mut p, 5).unwrap();
    let before = (a.clone(), p.free());
    let err = a.append(&mut p, 8).unwrap_err();
    match err {
        Error::OutOfKvBlocks {
            needed,
            free,
            total,
            block_size,
        } => assert_eq!((needed, free, total, block_size), (2, 0, 2, 4)),
        other => panic!("expected OutOfKvBlocks, got {other:?}"),
    }
    assert!(err_text(&a, &mut p).contains("KV cache is full"));
    assert_eq!((a.clone(), p.free()), before);
}

fn err_text(t: &BlockTable, p: &mut BlockPool) -> String {
    let mut t = t.clone();
    t.append(p, 1000).unwrap_err().to_string()
}

#[test]
fn a_fork_shares_blocks_and_the_first_write_into_a_shared_block_copies_it() {
    let mut p = pool(8, 4);
    let mut a = BlockTable::new();
    a.append(&mut p, 6).unwrap(); // blocks 0 (full) and 1 (2 rows)
    let mut b = a.fork(&mut p, 6);
    assert_eq!(b.blocks(), a.blocks());
    assert_eq!(p.refs(a.blocks()[0]), 2);
    assert_eq!(p.refs(a.blocks()[1]), 2);
    assert_eq!(p.free(), 6);
    // b writes position 6, inside the shared second block: it gets its own copy of 2 rows.
    let copy = b.append(&mut p, 1).unwrap().expect("a copy on write");
    assert_eq!(copy.from, a.blocks()[1]);
    assert_eq!(copy.rows, 2);
    assert_eq!(b.blocks()[1], copy.to);
    assert_ne!(copy.to, copy.from);
    assert_eq!(b.blocks()[0], a.blocks()[0]);
    assert_eq!((p.refs(copy.from), p.refs(copy.to)), (1, 1));
    // a's own tail is now private again: its next write needs no copy.
    assert_eq!(a.append(&mut p, 1).unwrap(), None);
    // Freeing both sequences frees every block exactly once.
    a.clear(&mut p);
    b.clear(&mut p);
    assert_eq!(p.free(), 8);
}

#[test]
fn sharing_whole_blocks_needs_no_copy() {
    let mut p = pool(4, 4);
    let mut a = BlockTable::new();
    a.append(&mut p, 8).unwrap();
    let mut b = a.fork(&mut p, 4);
    assert_eq!((b.len(), b.blocks().len()), (4, 1));
    assert_eq!(b.append(&mut p, 3).unwrap(), None);
    assert_eq!(p.refs(a.blocks()[0]), 2);
    assert_ne!(b.blocks()[1], a.blocks()[1]);
    b.clear(&mut p);
    assert_eq!(p.refs(a.blocks()[0]), 1);
    assert_eq!(p.free(), 2);
}

#[test]
fn a_copy_on_write_that_cannot_get_a_block_changes_nothing() {
    let mut p = pool(2, 4);
    let mut a = BlockTable::new();
    a.append(&mut p, 2).unwrap();
    let mut b = a.fork(&mut p, 2);
    let mut c = BlockTable::new();
    c.append(&mut p, 4).unwrap();
    assert_eq!(p.free(), 0);
    let before = b.clone();
    assert!(matches!(
        b.append(&mut p, 1),
        Err(Error::OutOfKvBlocks { needed: 1, .. })
    ));
    assert_eq!(b, before);
    assert_eq!(p.refs(a.blocks()[0]), 2);
}

#[test]
fn bad_pools_are_refused() {
    assert!(matches!(BlockPool::new(4, 0), Err(Error::InvalidOption(_))));
    let p = pool(0, 16);
    assert_eq!((p.total(), p.free(), p.blocks_for(17)), (0, 0, 2));
}

#[test]
fn truncating_past_the_end_or_forking_too_long_is_clamped() {
    let mut p = pool(4, 4);
    let mut a = BlockTable::new();
    a.append(&mut p, 5).unwrap();
    a.truncate(&mut p, 100);
    assert_eq!(a.len(), 5);
    let b = a.fork(&mut p, 100);
    assert_eq!(b.len(), 5);
    assert_eq!(p.free(), 2);
}

#[test]
fn needed_counts_what_append_takes() {
    let mut p = pool(16, 4);
    let mut a = BlockTable::new();
    assert_eq!(a.needed(&p, 0), 0);
    assert_eq!(a.needed(&p, 9), 3);
    a.append(&mut p, 6).unwrap();
    let b = a.fork(&mut p, 6);
    for n in [1, 2, 3, 6] {
        let mut t = b.clone();
        let mut q = p.clone();
        let want = t.needed(&q, n);
        let free = q.free();
        t.append(&mut q, n).unwrap();
        assert_eq!(free - q.free(), want, "append of {n}");
    }
    assert!(p.ensure_free(p.free()).is_ok());
    assert!(p.ensure_free(p.free() + 1).is_err());
}
