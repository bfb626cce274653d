//! Tests of the padded-batch adapter over a recording batch backend.

use super::*;
use crate::batch::KvUsage;
use std::collections::BTreeMap;

/// Keeps each sequence's tokens; a row's logits are `[len, last token]` (vocab 2).
#[derive(Default)]
struct Recorder {
    seqs: BTreeMap<SeqId, Vec<i32>>,
    next: u64,
    steps: usize,
}

impl BatchBackend for Recorder {
    fn add_sequence(&mut self) -> SeqId {
        self.next += 1;
        self.seqs.insert(SeqId(self.next), Vec::new());
        SeqId(self.next)
    }
    fn fork_sequence(&mut self, _from: SeqId, _len: usize) -> Result<SeqId> {
        unreachable!("the adapter never forks")
    }
    fn remove_sequence(&mut self, seq: SeqId) -> Result<()> {
        self.seqs.remove(&seq);
        Ok(())
    }
    fn truncate_sequence(&mut self, seq: SeqId, len: usize) -> Result<()> {
        self.seqs.get_mut(&seq).expect("known").truncate(len);
        Ok(())
    }
    fn sequence_len(&self, seq: SeqId) -> Result<usize> {
        Ok(self.seqs[&seq].len())
    }
    fn kv_usage(&self) -> KvUsage {
        KvUsage {
            block_size: 1,
            total_blocks: 0,
            free_blocks: 0,
        }
    }
    fn step(&mut self, chunks: &[Chunk<'_>]) -> Result<Vec<f32>> {
        self.steps += 1;
        let mut out = Vec::new();
        for c in chunks {
            let seq = self.seqs.get_mut(&c.seq).expect("known");
            let start = seq.len();
            seq.extend_from_slice(c.tokens);
            let first = c.tokens.len() - c.logits.rows(c.tokens.len());
            for (i, &t) in c.tokens.iter().enumerate().skip(first) {
                out.extend([(start + i + 1) as f32, t as f32]);
            }
        }
        Ok(out)
    }
}

fn step<'a>(tokens: &'a [i32], new_len: usize, mask: &'a [i64], total: usize) -> StepInput<'a> {
    StepInput {
        tokens,
        new_len,
        attention_mask: mask,
        total_len: total,
    }
}

#[test]
fn pads_are_dropped_and_every_row_runs_in_one_step() {
    let mut b = PaddedBatch::new(Box::new(Recorder::default()), 2);
    // Row 0 is left-padded by two: its real prompt is [7, 8].
    let tokens = [0, 0, 7, 8, 1, 2, 3, 4];
    let mask = [0, 0, 1, 1, 1, 1, 1, 1];
    let logits = b.forward(&step(&tokens, 4, &mask, 4)).unwrap();
    assert_eq!(logits, vec![2.0, 8.0, 4.0, 4.0]);
    let mask = [0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    let logits = b.forward(&step(&[9, 5], 1, &mask, 5)).unwrap();
    assert_eq!(logits, vec![3.0, 9.0, 5.0, 5.0]);
    assert_eq!(b.cached_len(), 5);
    let rec = &b.inner;
    assert_eq!(rec.sequence_len(b.rows[0]).unwrap(), 3);
    assert_eq!(rec.sequence_len(b.rows[1]).unwrap(), 5);
}

#[test]
fn bad_steps_are_errors_and_change_nothing() {
    let mut b = PaddedBatch::new(Box::new(Recorder::default()), 2);
    // Wrong number of tokens for the batch.
    assert!(b.forward(&step(&[1, 2, 3], 1, &[1, 1], 1)).is_err());
    // A step that does not start at the cached length.
    assert!(b.forward(&step(&[1, 2], 1, &[1, 1, 1, 1], 2)).is_err());
    // An all-padding row.
    let err = b.forward(&step(&[0, 1], 1, &[0, 1], 1)).unwrap_err();
    assert!(
        err.to_string().contains("row 0 has no attended token"),
        "{err}"
    );
    // Every position's logits with padding.
    assert!(
        b.forward_all(&step(&[0, 1, 2, 3], 2, &[0, 1, 1, 1], 2))
            .is_err()
    );
    assert_eq!(b.cached_len(), 0);
}

#[test]
fn every_position_and_rewinds() {
    let mut b = PaddedBatch::new(Box::new(Recorder::default()), 1);
    let logits = b.forward_all(&step(&[4, 5, 6], 3, &[1, 1, 1], 3)).unwrap();
    assert_eq!(logits, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    b.rewind_to(2).unwrap();
    assert_eq!(b.cached_len(), 2);
    assert_eq!(b.inner.sequence_len(b.rows[0]).unwrap(), 2);
    let mut two = PaddedBatch::new(Box::new(Recorder::default()), 2);
    two.forward(&step(&[1, 2], 1, &[1, 1], 1)).unwrap();
    assert!(two.rewind_to(0).is_ok());
    two.forward(&step(&[1, 2, 3, 4], 2, &[1, 1, 1, 1], 2))
        .unwrap();
    assert!(two.rewind_to(1).is_err());
}
