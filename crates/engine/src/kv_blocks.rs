//! A KV cache in fixed-size blocks: the pool of block ids with their reference counts
//! ([`BlockPool`]) and the list of blocks one sequence holds ([`BlockTable`]).
//!
//! This is bookkeeping only; a backend keeps the blocks' keys and values in its own memory,
//! block `b` at offset `b * block_size` positions. A block may be held by several sequences
//! that share a prefix (a fork, or the Engine's prefix cache); a sequence that appends into a
//! shared block gets a private copy of it first ([`BlockCopy`], copy on write), so a write never
//! reaches another sequence's positions. Running out of blocks is an error that leaves every
//! table and the pool as they were.

use crate::Error;

/// The index of a block in its pool (and in the backend's block storage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockId(pub u32);

impl BlockId {
    /// The block's index, for addressing the backend's storage.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Free block ids and a reference count for every block.
#[derive(Debug, Clone)]
pub struct BlockPool {
    block_size: usize,
    refs: Vec<u32>,
    /// Free ids; the last is handed out next.
    free: Vec<BlockId>,
}

/// A block a sequence held in common with others, replaced by a private one before a write:
/// the backend copies the first `rows` positions of `from` into `to` before the step writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockCopy {
    pub from: BlockId,
    pub to: BlockId,
    pub rows: usize,
}

impl BlockPool {
    /// `blocks` blocks of `block_size` positions each, all free.
    pub fn new(blocks: usize, block_size: usize) -> Result<Self, Error> {
        if block_size == 0 {
            return Err(Error::InvalidOption(
                "the KV block size must be at least one position".into(),
            ));
        }
        let count = u32::try_from(blocks).map_err(|_| {
            Error::InvalidOption(format!("{blocks} KV blocks are more than a pool can index"))
        })?;
        Ok(BlockPool {
            block_size,
            refs: vec![0; blocks],
            free: (0..count).rev().map(BlockId).collect(),
        })
    }

    /// Positions per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Blocks in the pool.
    pub fn total(&self) -> usize {
        self.refs.len()
    }

    /// Blocks no sequence holds.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// How many sequences hold `block` (0: free).
    pub fn refs(&self, block: BlockId) -> u32 {
        self.refs.get(block.index()).copied().unwrap_or(0)
    }

    /// Blocks that hold `len` positions.
    pub fn blocks_for(&self, len: usize) -> usize {
        len.div_ceil(self.block_size)
    }

    fn take(&mut self) -> Option<BlockId> {
        let id = self.free.pop()?;
        self.refs[id.index()] = 1;
        Some(id)
    }

    fn retain(&mut self, block: BlockId) {
        self.refs[block.index()] += 1;
    }

    fn release(&mut self, block: BlockId) {
        let count = &mut self.refs[block.index()];
        debug_assert!(*count > 0, "block {} released while free", block.0);
        *count = count.saturating_sub(1);
        if *count == 0 {
            self.free.push(block);
        }
    }

    /// Fails with [`Error::OutOfKvBlocks`] unless `needed` blocks are free.
    pub fn ensure_free(&self, needed: usize) -> Result<(), Error> {
        if needed > self.free() {
            return Err(self.out_of_blocks(needed));
        }
        Ok(())
    }

    fn out_of_blocks(&self, needed: usize) -> Error {
        Error::OutOfKvBlocks {
            needed,
            free: self.free(),
            total: self.total(),
            block_size: self.block_size,
        }
    }
}

/// The blocks of one sequence, in position order, and how many positions it holds. Every call
/// must pass the pool the table's blocks came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockTable {
    blocks: Vec<BlockId>,
    len: usize,
}

impl BlockTable {
    /// An empty sequence.
    pub fn new() -> Self {
        Self::default()
    }

    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the sequence holds no position.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The blocks, in position order.
    pub fn blocks(&self) -> &[BlockId] {
        &self.blocks
    }

    /// The block and the row within it of position `pos` (`pos < len`, or a position the last
    /// [`append`](Self::append) reserved).
    pub fn locate(&self, pos: usize, block_size: usize) -> Option<(BlockId, usize)> {
        let block = *self.blocks.get(pos / block_size)?;
        Some((block, pos % block_size))
    }

    /// Blocks an [`append`](Self::append) of `n` positions takes from `pool` (a copy on write
    /// included).
    pub fn needed(&self, pool: &BlockPool, n: usize) -> usize {
        let new_len = self.len.saturating_add(n);
        pool.blocks_for(new_len).saturating_sub(self.blocks.len())
            + usize::from(self.tail_shared(pool, n))
    }

    /// Whether appending `n` positions writes into a block other sequences hold.
    fn tail_shared(&self, pool: &BlockPool, n: usize) -> bool {
        let bs = pool.block_size();
        n > 0
            && !self.len.is_multiple_of(bs)
            && self
                .blocks
                .get(self.len / bs)
                .is_some_and(|&b| pool.refs(b) > 1)
    }

    /// Extends the sequence by `n` positions, taking the blocks they need. When the block that
    /// position `len` falls in is shared, it is replaced by a private copy, returned for the
    /// backend to fill before it writes. All or nothing: without enough free blocks, an error and
    /// no change.
    pub fn append(&mut self, pool: &mut BlockPool, n: usize) -> Result<Option<BlockCopy>, Error> {
        let bs = pool.block_size();
        let new_len = self.len.checked_add(n).ok_or_else(|| {
            Error::InvalidOption(format!("{} + {n} positions overflow", self.len))
        })?;
        pool.ensure_free(self.needed(pool, n))?;
        let mut copy = None;
        if self.tail_shared(pool, n) {
            let at = self.len / bs;
            let from = self.blocks[at];
            let to = pool.take().ok_or_else(|| pool.out_of_blocks(1))?;
            pool.release(from);
            self.blocks[at] = to;
            copy = Some(BlockCopy {
                from,
                to,
                rows: self.len % bs,
            });
        }
        while self.blocks.len() < pool.blocks_for(new_len) {
            let block = pool.take().ok_or_else(|| pool.out_of_blocks(1))?;
            self.blocks.push(block);
        }
        self.len = new_len;
        Ok(copy)
    }

    /// Keeps the first `len` positions (no change when the sequence is shorter) and hands back
    /// the blocks past them.
    pub fn truncate(&mut self, pool: &mut BlockPool, len: usize) {
        if len >= self.len {
            return;
        }
        let keep = pool.blocks_for(len);
        for block in self.blocks.drain(keep..) {
            pool.release(block);
        }
        self.len = len;
    }

    /// Hands back every block.
    pub fn clear(&mut self, pool: &mut BlockPool) {
        self.truncate(pool, 0);
    }

    /// A new sequence holding this one's first `len` positions (at most its length) in the same
    /// blocks; the first append into a block they share copies it.
    pub fn fork(&self, pool: &mut BlockPool, len: usize) -> BlockTable {
        let len = len.min(self.len);
        let blocks: Vec<BlockId> = self.blocks[..pool.blocks_for(len)].to_vec();
        for &block in &blocks {
            pool.retain(block);
        }
        BlockTable { blocks, len }
    }
}

#[cfg(test)]
#[path = "kv_blocks_tests.rs"]
mod tests;
