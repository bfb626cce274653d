//! The step scheduler: the order in which one forward pass issues its weight copies and the
//! waits that order them against compute. Streamed weight `j` (counted in step order) always
//! lands in slot `j % slots`, so every address is fixed and the pass can be captured as a graph.
//! The copy stream runs `slots` weights ahead of compute: the copy into a slot is issued as soon
//! as the slot's previous occupant is released, and waits on the device for that release.
//!
//! This is pure logic; the CUDA pager turns each [`PagerOp`] into one driver call, and
//! [`super::simulate`] replays the same ops on a simulated device.

use crate::{Error, Result};

/// One thing the pager does, in issue order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PagerOp {
    /// The copy stream waits for everything issued so far on the compute stream (pass start:
    /// the previous pass has released every slot).
    Fork,
    /// The copy stream waits until `slot`'s previous occupant has been released.
    WaitReleased { slot: usize },
    /// Copy streamed weight `weight` into `slot` (copy stream).
    Copy { weight: usize, slot: usize },
    /// The compute stream waits for the copy into `slot`.
    WaitCopied { slot: usize },
    /// The compute stream marks `slot` consumed (after the kernels that read it).
    Release { slot: usize },
    /// The compute stream waits for everything on the copy stream (pass end).
    Join,
}

/// The slot streamed weight `weight` always uses in a pool of `slots`: the one rule that both
/// the scheduler's ops and the addresses the kernels read follow.
pub fn slot_of(weight: usize, slots: usize) -> usize {
    weight % slots.max(1)
}

/// The scheduler state of one pass.
#[derive(Debug, Clone)]
pub struct PassSchedule {
    streamed: usize,
    slots: usize,
    next_copy: usize,
    next_use: usize,
    in_use: Option<usize>,
}

impl PassSchedule {
    /// A pass over `streamed` streamed weights with `slots` slots (at least 1 when anything
    /// streams).
    pub fn new(streamed: usize, slots: usize) -> Result<Self> {
        if streamed > 0 && slots == 0 {
            return Err(Error::Invalid {
                what: "pager",
                why: "streamed weights need at least one slot".into(),
            });
        }
        Ok(PassSchedule {
            streamed,
            slots,
            next_copy: 0,
            next_use: 0,
            in_use: None,
        })
    }

    /// The slot weight `j` uses.
    pub fn slot_of(&self, j: usize) -> usize {
        slot_of(j, self.slots)
    }

    fn copy(&mut self, ops: &mut Vec<PagerOp>) {
        let weight = self.next_copy;
        let slot = self.slot_of(weight);
        if weight >= self.slots {
            ops.push(PagerOp::WaitReleased { slot });
        }
        ops.push(PagerOp::Copy { weight, slot });
        self.next_copy += 1;
    }

    /// Pass start: fork the copy stream and fill every slot.
    pub fn begin(&mut self) -> Vec<PagerOp> {
        self.next_copy = 0;
        self.next_use = 0;
        self.in_use = None;
        if self.streamed == 0 {
            return Vec::new();
        }
        let mut ops = vec![PagerOp::Fork];
        while self.next_copy < self.streamed.min(self.slots) {
            self.copy(&mut ops);
        }
        ops
    }

    /// Before the kernels that read streamed weight `j` (which must be the next in step order).
    pub fn acquire(&mut self, j: usize) -> Result<Vec<PagerOp>> {
        if j != self.next_use || self.in_use.is_some() || j >= self.streamed {
            return Err(Error::Invalid {
                what: "pager",
                why: format!(
                    "streamed weight {j} used out of plan order (expected {} of {})",
                    self.next_use, self.streamed
                ),
            });
        }
        self.in_use = Some(j);
        Ok(vec![PagerOp::WaitCopied {
            slot: self.slot_of(j),
        }])
    }

    /// After the kernels that read streamed weight `j`: release its slot and issue the copy of
    /// the slot's next occupant.
    pub fn release(&mut self, j: usize) -> Result<Vec<PagerOp>> {
        if self.in_use != Some(j) {
            return Err(Error::Invalid {
                what: "pager",
                why: format!("streamed weight {j} released but not acquired"),
            });
        }
        self.in_use = None;
        self.next_use += 1;
        let mut ops = vec![PagerOp::Release {
            slot: self.slot_of(j),
        }];
        if self.next_copy < self.streamed {
            self.copy(&mut ops);
        }
        Ok(ops)
    }

    /// Pass end: every streamed weight must have been used once.
    pub fn end(&mut self) -> Result<Vec<PagerOp>> {
        if self.next_use != self.streamed || self.in_use.is_some() {
            return Err(Error::Invalid {
                what: "pager",
                why: format!(
                    "the pass used {} of {} streamed weights",
                    self.next_use, self.streamed
                ),
            });
        }
        Ok(if self.streamed == 0 {
            Vec::new()
        } else {
            vec![PagerOp::Join]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a device would hold: slot contents, whether each occupant was released, and
    /// whether the copy stream waited for that release.
    struct Device {
        content: Vec<Option<usize>>,
        released: Vec<bool>,
        waited: Vec<bool>,
        ops: Vec<PagerOp>,
        slots: usize,
    }

    impl Device {
        fn run(&mut self, ops: Vec<PagerOp>) {
            for op in ops {
                match op {
                    PagerOp::Fork => self.waited.iter_mut().for_each(|w| *w = true),
                    PagerOp::WaitReleased { slot } => {
                        assert!(self.released[slot], "wait on a slot still in use");
                        self.waited[slot] = true;
                    }
                    PagerOp::Copy { weight, slot } => {
                        assert!(
                            self.released[slot] && self.waited[slot],
                            "copy into a busy slot"
                        );
                        assert_eq!(slot, weight % self.slots);
                        self.content[slot] = Some(weight);
                        self.released[slot] = false;
                        self.waited[slot] = false;
                    }
                    PagerOp::WaitCopied { .. } | PagerOp::Join => {}
                    PagerOp::Release { slot } => self.released[slot] = true,
                }
                self.ops.push(op);
            }
        }
    }

    /// Replays the ops of `passes` passes, checking that a copy never overwrites a slot whose
    /// occupant is not yet released and that every weight reads the slot holding it.
    fn replay(streamed: usize, slots: usize, passes: usize) -> Vec<PagerOp> {
        let mut s = PassSchedule::new(streamed, slots).unwrap();
        let mut d = Device {
            content: vec![None; slots],
            released: vec![true; slots],
            waited: vec![false; slots],
            ops: Vec::new(),
            slots,
        };
        for _ in 0..passes {
            d.run(s.begin());
            for j in 0..streamed {
                let ops = s.acquire(j).unwrap();
                let PagerOp::WaitCopied { slot } = ops[0] else {
                    panic!("acquire waits for the copy");
                };
                assert_eq!(d.content[slot], Some(j), "weight {j} reads its own slot");
                d.run(ops);
                d.run(s.release(j).unwrap());
            }
            d.run(s.end().unwrap());
        }
        d.ops
    }

    #[test]
    fn every_streamed_weight_is_copied_once_per_pass_into_its_fixed_slot() {
        for (streamed, slots) in [(1, 2), (5, 2), (7, 3), (8, 4), (3, 8), (128, 2)] {
            let ops = replay(streamed, slots, 3);
            let copies: Vec<(usize, usize)> = ops
                .iter()
                .filter_map(|op| match op {
                    PagerOp::Copy { weight, slot } => Some((*weight, *slot)),
                    _ => None,
                })
                .collect();
            assert_eq!(copies.len(), 3 * streamed);
            for (i, (w, s)) in copies.iter().enumerate() {
                assert_eq!(*w, i % streamed);
                assert_eq!(*s, w % slots);
            }
            assert_eq!(
                ops.iter().filter(|o| **o == PagerOp::Fork).count(),
                3,
                "one fork per pass"
            );
        }
    }

    #[test]
    fn copies_run_a_full_ring_ahead_of_compute() {
        let mut s = PassSchedule::new(10, 3).unwrap();
        let first = s.begin();
        assert_eq!(
            first
                .iter()
                .filter(|o| matches!(o, PagerOp::Copy { .. }))
                .count(),
            3
        );
        s.acquire(0).unwrap();
        let after = s.release(0).unwrap();
        assert_eq!(
            after,
            vec![
                PagerOp::Release { slot: 0 },
                PagerOp::WaitReleased { slot: 0 },
                PagerOp::Copy { weight: 3, slot: 0 }
            ]
        );
    }

    #[test]
    fn out_of_order_use_and_short_passes_are_errors() {
        let mut s = PassSchedule::new(4, 2).unwrap();
        s.begin();
        assert!(s.acquire(1).is_err());
        s.acquire(0).unwrap();
        assert!(s.acquire(0).is_err(), "acquire twice without release");
        assert!(s.release(1).is_err());
        s.release(0).unwrap();
        assert!(s.end().is_err(), "three weights never used");
        assert!(PassSchedule::new(3, 0).is_err());
        // Nothing streamed: no ops at all.
        let mut none = PassSchedule::new(0, 0).unwrap();
        assert!(none.begin().is_empty());
        assert!(none.end().unwrap().is_empty());
    }
}
