//! The native CPU decoder's batch state: any number of sequences over one KV cache in blocks,
//! stepped together ([`BatchBackend`]), each computed as it would be alone (the linear kernels
//! give a row the same bits alone or in a batch, and attention is per sequence).

use crate::cpu::forward::{SeqRows, forward};
use crate::cpu::kv::{BLOCK_SIZE, KvStore};
use crate::cpu::model::NativeModel;
use crate::cpu::threads::ThreadPool;
use genai_engine::batch::{BatchBackend, BatchOptions, Chunk, KvUsage, SeqId, check_chunks};
use genai_engine::kv_blocks::{BlockPool, BlockTable};
use genai_engine::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

fn native(message: impl std::fmt::Display) -> Error {
    Error::backend("native", message)
}

/// Sequences over one KV cache in blocks.
pub(crate) struct CpuBatch {
    model: Arc<NativeModel>,
    pool: Arc<ThreadPool>,
    kv: KvStore,
    blocks: BlockPool,
    seqs: BTreeMap<SeqId, BlockTable>,
    next_id: u64,
    max_sequence: usize,
}

impl CpuBatch {
    /// A state of `options.kv_positions` positions (whole blocks), refused up front when it
    /// would not fit in memory (capped by `memory_limit` bytes when given).
    pub(crate) fn new(
        model: Arc<NativeModel>,
        pool: Arc<ThreadPool>,
        options: &BatchOptions,
        memory_limit: Option<u64>,
    ) -> Result<Self> {
        let blocks = options.kv_positions.div_ceil(BLOCK_SIZE);
        let what = format!(
            "the native KV cache of {} positions ({blocks} blocks of {BLOCK_SIZE})",
            options.kv_positions
        );
        let bytes = KvStore::bytes(&model, blocks).ok_or_else(|| Error::OutOfMemory {
            what: what.clone(),
            bytes: u64::MAX,
            available: genai_engine::memory::available_memory(memory_limit).unwrap_or(0),
        })?;
        genai_engine::memory::ensure_fits(&what, bytes, memory_limit)?;
        Ok(CpuBatch {
            kv: KvStore::new(&model, blocks),
            model,
            pool,
            blocks: BlockPool::new(blocks, BLOCK_SIZE)?,
            seqs: BTreeMap::new(),
            next_id: 0,
            max_sequence: options.max_sequence,
        })
    }

    fn table(&self, seq: SeqId) -> Result<&BlockTable> {
        self.seqs.get(&seq).ok_or_else(|| unknown(seq))
    }
}

fn unknown(seq: SeqId) -> Error {
    Error::InvalidState(format!(
        "sequence {} is not in this batch (removed, or never added)",
        seq.0
    ))
}

impl BatchBackend for CpuBatch {
    fn add_sequence(&mut self) -> SeqId {
        self.next_id += 1;
        let id = SeqId(self.next_id);
        self.seqs.insert(id, BlockTable::new());
        id
    }

    fn fork_sequence(&mut self, from: SeqId, len: usize) -> Result<SeqId> {
        let table = self
            .seqs
            .get(&from)
            .ok_or_else(|| unknown(from))?
            .fork(&mut self.blocks, len);
        self.next_id += 1;
        let id = SeqId(self.next_id);
        self.seqs.insert(id, table);
        Ok(id)
    }

    fn remove_sequence(&mut self, seq: SeqId) -> Result<()> {
        let mut table = self.seqs.remove(&seq).ok_or_else(|| unknown(seq))?;
        table.clear(&mut self.blocks);
        Ok(())
    }

    fn truncate_sequence(&mut self, seq: SeqId, len: usize) -> Result<()> {
        let table = self.seqs.get_mut(&seq).ok_or_else(|| unknown(seq))?;
        table.truncate(&mut self.blocks, len);
        Ok(())
    }

    fn sequence_len(&self, seq: SeqId) -> Result<usize> {
        Ok(self.table(seq)?.len())
    }

    fn kv_usage(&self) -> KvUsage {
        KvUsage {
            block_size: BLOCK_SIZE,
            total_blocks: self.blocks.total(),
            free_blocks: self.blocks.free(),
        }
    }

    fn step(&mut self, chunks: &[Chunk<'_>]) -> Result<Vec<f32>> {
        check_chunks(chunks, self.model.vocab, |seq| self.seqs.contains_key(&seq))?;
        let mut needed = 0usize;
        for chunk in chunks {
            let table = self.table(chunk.seq)?;
            let end = table.len().saturating_add(chunk.tokens.len());
            if end > self.max_sequence {
                return Err(native(format!(
                    "sequence {} would hold {end} positions, more than the {} this batch was \
                     made for",
                    chunk.seq.0, self.max_sequence
                )));
            }
            needed = needed.saturating_add(table.needed(&self.blocks, chunk.tokens.len()));
        }
        self.blocks.ensure_free(needed)?;
        // Nothing below fails for want of blocks; a failed pass puts every table back. (A block
        // that several of these sequences share counts as copied by each, so a step can be
        // refused with a block to spare, never run short.)
        let mut pasts = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            let table = self
                .seqs
                .get_mut(&chunk.seq)
                .ok_or_else(|| unknown(chunk.seq))?;
            pasts.push(table.len());
            if let Some(copy) = table.append(&mut self.blocks, chunk.tokens.len())? {
                self.kv.copy_rows(copy);
            }
        }
        let ids: Vec<Vec<i64>> = chunks
            .iter()
            .map(|c| c.tokens.iter().map(|&t| i64::from(t)).collect())
            .collect();
        let blocks: Vec<Vec<usize>> = chunks
            .iter()
            .map(|c| {
                self.seqs[&c.seq]
                    .blocks()
                    .iter()
                    .map(|b| b.index())
                    .collect()
            })
            .collect();
        let rows: Vec<SeqRows<'_>> = chunks
            .iter()
            .enumerate()
            .map(|(i, c)| SeqRows {
                blocks: &blocks[i],
                past_len: pasts[i],
                ids: &ids[i],
                logits: c.logits,
            })
            .collect();
        match forward(&self.model, &mut self.kv, &rows, &self.pool) {
            Ok(logits) => Ok(logits),
            Err(e) => {
                for (chunk, &past) in chunks.iter().zip(&pasts) {
                    if let Some(table) = self.seqs.get_mut(&chunk.seq) {
                        table.truncate(&mut self.blocks, past);
                    }
                }
                Err(native(e))
            }
        }
    }
}
