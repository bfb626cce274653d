//! The KV cache's element kind and a layer's cache as the attention kernels take it. The cache
//! holds keys and values in the activations' precision: every value written there is already
//! rounded to it (the rotated keys and the qkv projection's values), so an f16 or bf16 cache holds
//! the numbers an f32 one would, in half the device memory and half the bytes each step reads.

use crate::cuda::launch::int;
use crate::cuda::memory::DevPtr;
use crate::cuda::span::DevSpan;
use crate::error::Error;

/// Element kind of a KV cache; its code is the kernels' `kv` argument (the codes of `act`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KvKind {
    F32,
    F16,
    Bf16,
}

impl KvKind {
    /// The kind that holds activations of precision `act` (0 f32, 1 f16, 2 bf16) exactly.
    pub fn of_act(act: i32) -> KvKind {
        match act {
            1 => KvKind::F16,
            2 => KvKind::Bf16,
            _ => KvKind::F32,
        }
    }

    /// [`KvKind::of_act`] unless `kv_f32` (`CudaTuning::kv_f32`).
    pub fn chosen(act: i32, kv_f32: bool) -> KvKind {
        if kv_f32 {
            KvKind::F32
        } else {
            KvKind::of_act(act)
        }
    }

    /// The kernels' `kv` argument.
    pub fn code(self) -> i32 {
        match self {
            KvKind::F32 => 0,
            KvKind::F16 => 1,
            KvKind::Bf16 => 2,
        }
    }

    /// Bytes of one element.
    pub fn bytes(self) -> usize {
        match self {
            KvKind::F32 => 4,
            KvKind::F16 | KvKind::Bf16 => 2,
        }
    }

    /// The fused decode attention's entry for a cache of this kind.
    pub fn decode_entry(self) -> &'static str {
        match self {
            KvKind::F32 => "attention_decode_f32",
            KvKind::F16 => "attention_decode_kv_f16",
            KvKind::Bf16 => "attention_decode_kv_bf16",
        }
    }

    /// Every kind.
    pub const ALL: [KvKind; 3] = [KvKind::F32, KvKind::F16, KvKind::Bf16];

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            KvKind::F32 => "f32",
            KvKind::F16 => "f16",
            KvKind::Bf16 => "bf16",
        }
    }
}

/// A layer's keys and values on the device, `[kv_heads, capacity, head_size]` each, of one kind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KvCache<'a> {
    /// Bytes of keys and of values.
    pub k: DevSpan<'a, u8>,
    pub v: DevSpan<'a, u8>,
    pub capacity: usize,
    pub kind: KvKind,
}

impl KvCache<'_> {
    /// The kernels' arguments: keys, values, capacity and the kind's code; each cache checked
    /// to hold `[kv_heads, capacity, hs]` values of its kind (what `kernel` indexes).
    pub fn args(
        &self,
        kernel: &'static str,
        kv_heads: usize,
        hs: usize,
    ) -> Result<(DevPtr, DevPtr, i32, i32), Error> {
        let bytes = kv_heads * self.capacity * hs * self.kind.bytes();
        let (k, v) = (
            self.k.need(kernel, "k_cache", bytes)?,
            self.v.need(kernel, "v_cache", bytes)?,
        );
        let capacity = int("capacity", self.capacity)?;
        Ok((k, v, capacity, self.kind.code()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_takes_the_activations_precision() {
        assert_eq!(KvKind::of_act(0), KvKind::F32);
        assert_eq!(KvKind::of_act(1), KvKind::F16);
        assert_eq!(KvKind::of_act(2), KvKind::Bf16);
        // The kernels read the kind by the same code as the activations' precision.
        for act in 0..3 {
            assert_eq!(KvKind::of_act(act).code(), act);
        }
        assert_eq!(KvKind::F32.bytes(), 4);
        assert_eq!(KvKind::F16.bytes(), 2);
        assert_eq!(KvKind::Bf16.bytes(), 2);
    }

    #[test]
    fn every_kind_has_its_decode_entry_in_the_family() {
        let family = crate::cuda::compile::family("decode_attention").expect("the family");
        for kind in KvKind::ALL {
            let entry = kind.decode_entry();
            assert!(family.symbols.contains(&entry), "{entry} not loaded");
            let declared = format!("__launch_bounds__(DA_THREADS) {entry}(DA_PARAMS)");
            assert!(family.code.contains(&declared), "{entry} not in the source");
        }
    }
}
