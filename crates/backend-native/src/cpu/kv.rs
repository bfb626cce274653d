//! The native CPU decoder's KV cache in blocks: for every layer, keys and values of a pool of
//! blocks laid out `[blocks][kv_heads][BLOCK_SIZE][head_size]` (f32), which the sequences'
//! block tables (`genai_engine::kv_blocks`) address.

use crate::cpu::kernels::KvBlocks;
use crate::cpu::model::NativeModel;
use genai_engine::kv_blocks::BlockCopy;

/// Positions per block. A key row is `head_size` values, so a block of one KV head is 4 KiB
/// and more for the usual head sizes: long enough runs for the attention kernel, short enough
/// that a sequence wastes little of its last block.
pub(crate) const BLOCK_SIZE: usize = 32;

/// One layer's keys and values.
pub(crate) struct LayerKv {
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    kv_heads: usize,
    head_size: usize,
}

impl LayerKv {
    /// Values of one block.
    fn block_len(&self) -> usize {
        self.kv_heads * BLOCK_SIZE * self.head_size
    }

    /// Writes one position's keys and values (`[kv_heads, head_size]` each) at `row` of `block`.
    pub(crate) fn write(&mut self, block: usize, row: usize, k: &[f32], v: &[f32]) {
        let hs = self.head_size;
        for h in 0..self.kv_heads {
            let at = ((block * self.kv_heads + h) * BLOCK_SIZE + row) * hs;
            self.k[at..at + hs].copy_from_slice(&k[h * hs..(h + 1) * hs]);
            self.v[at..at + hs].copy_from_slice(&v[h * hs..(h + 1) * hs]);
        }
    }

    /// The attention kernel's view.
    pub(crate) fn view(&self) -> KvBlocks<'_> {
        KvBlocks {
            k: &self.k,
            v: &self.v,
            block_size: BLOCK_SIZE,
        }
    }

    fn copy_rows(&mut self, copy: BlockCopy) {
        let (len, hs) = (self.block_len(), self.head_size);
        let (from, to) = (copy.from.index() * len, copy.to.index() * len);
        for h in 0..self.kv_heads {
            let (src, dst) = (from + h * BLOCK_SIZE * hs, to + h * BLOCK_SIZE * hs);
            let n = copy.rows * hs;
            self.k.copy_within(src..src + n, dst);
            self.v.copy_within(src..src + n, dst);
        }
    }
}

/// Every layer's blocks.
pub(crate) struct KvStore {
    pub layers: Vec<LayerKv>,
}

impl KvStore {
    /// Bytes of `blocks` blocks for `model`, or `None` on overflow.
    pub(crate) fn bytes(model: &NativeModel, blocks: usize) -> Option<u64> {
        model.layers.iter().try_fold(0u64, |acc, layer| {
            let values = (blocks as u64)
                .checked_mul(2 * layer.kv_heads as u64)?
                .checked_mul((BLOCK_SIZE * layer.head_size) as u64)?;
            acc.checked_add(values.checked_mul(size_of::<f32>() as u64)?)
        })
    }

    /// `blocks` zeroed blocks for every layer of `model` (the caller has checked the memory).
    pub(crate) fn new(model: &NativeModel, blocks: usize) -> Self {
        let layers = model
            .layers
            .iter()
            .map(|layer| {
                let len = blocks * layer.kv_heads * BLOCK_SIZE * layer.head_size;
                LayerKv {
                    k: vec![0.0; len],
                    v: vec![0.0; len],
                    kv_heads: layer.kv_heads,
                    head_size: layer.head_size,
                }
            })
            .collect();
        KvStore { layers }
    }

    /// Copies the first `copy.rows` positions of block `copy.from` into `copy.to`, every layer.
    pub(crate) fn copy_rows(&mut self, copy: BlockCopy) {
        for layer in &mut self.layers {
            layer.copy_rows(copy);
        }
    }
}
