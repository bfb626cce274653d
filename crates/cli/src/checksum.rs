//! A decoder wrapper that hashes every logit its generations return while hashing is on: two
//! runs with equal checksums returned bitwise-equal logits (the benchmark's byte-exactness check
//! across VRAM budgets, taken on the warm-up run so the timed runs pay nothing).

use genai_engine::{
    BackendCounters, BackendInfo, DecodeBackend, Decoder, SamplingSpec, StartOptions, StepInput,
};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// FNV-1a over the logits' bit patterns, in order.
#[derive(Debug, Default)]
struct Hash {
    value: Option<u64>,
}

impl Hash {
    fn add(&mut self, values: &[f32]) {
        let mut h = self.value.unwrap_or(0xcbf2_9ce4_8422_2325);
        for v in values {
            for byte in v.to_bits().to_le_bytes() {
                h ^= u64::from(byte);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        self.value = Some(h);
    }
}

struct Shared {
    on: AtomicBool,
    hash: Mutex<Hash>,
}

/// Wraps a decoder; [`Checksummed::hashing`] turns hashing on and off.
pub struct Checksummed<'a> {
    inner: &'a dyn Decoder,
    shared: Arc<Shared>,
}

impl<'a> Checksummed<'a> {
    pub fn new(inner: &'a dyn Decoder) -> Self {
        Checksummed {
            inner,
            shared: Arc::new(Shared {
                on: AtomicBool::new(false),
                hash: Mutex::new(Hash::default()),
            }),
        }
    }

    pub fn hashing(&self, on: bool) {
        self.shared.on.store(on, Ordering::SeqCst);
    }

    /// The hash of every logit returned while hashing was on, as 16 hex digits.
    pub fn checksum(&self) -> Option<String> {
        let hash = self.shared.hash.lock().ok()?;
        hash.value.map(|v| format!("{v:016x}"))
    }
}

struct Hashed {
    inner: Box<dyn DecodeBackend>,
    shared: Arc<Shared>,
}

impl Hashed {
    fn record(&self, logits: &[f32]) {
        if self.shared.on.load(Ordering::SeqCst)
            && let Ok(mut hash) = self.shared.hash.lock()
        {
            hash.add(logits);
        }
    }
}

impl DecodeBackend for Hashed {
    fn forward(&mut self, input: &StepInput<'_>) -> genai_engine::Result<Vec<f32>> {
        let logits = self.inner.forward(input)?;
        self.record(&logits);
        Ok(logits)
    }

    fn forward_all(&mut self, input: &StepInput<'_>) -> genai_engine::Result<Vec<f32>> {
        let logits = self.inner.forward_all(input)?;
        self.record(&logits);
        Ok(logits)
    }

    /// While hashing, every step returns its logits (so they are hashed); otherwise the inner
    /// backend may choose on its device, as it would unwrapped.
    fn forward_choose(
        &mut self,
        input: &StepInput<'_>,
        spec: &SamplingSpec<'_>,
    ) -> genai_engine::Result<Option<i32>> {
        if self.shared.on.load(Ordering::SeqCst) {
            return Ok(None);
        }
        self.inner.forward_choose(input, spec)
    }

    fn rewind_to(&mut self, len: usize) -> genai_engine::Result<()> {
        self.inner.rewind_to(len)
    }

    fn cached_len(&self) -> usize {
        self.inner.cached_len()
    }
}

impl Decoder for Checksummed<'_> {
    fn start(&self, options: &StartOptions) -> genai_engine::Result<Box<dyn DecodeBackend>> {
        Ok(Box::new(Hashed {
            inner: self.inner.start(options)?,
            shared: Arc::clone(&self.shared),
        }))
    }

    fn info(&self) -> &BackendInfo {
        self.inner.info()
    }

    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    fn counters(&self) -> BackendCounters {
        self.inner.counters()
    }

    fn weight_bytes_per_token(&self) -> Option<u64> {
        self.inner.weight_bytes_per_token()
    }
}

#[cfg(test)]
mod tests {
    use super::Hash;

    #[test]
    fn the_hash_sees_every_bit_and_the_order() {
        let mut a = Hash::default();
        a.add(&[1.0, 2.0]);
        let mut b = Hash::default();
        b.add(&[1.0]);
        b.add(&[2.0]);
        assert_eq!(a.value, b.value, "split calls hash like one");
        let mut c = Hash::default();
        c.add(&[2.0, 1.0]);
        assert_ne!(a.value, c.value);
        let mut d = Hash::default();
        d.add(&[1.0, f32::from_bits(2.0f32.to_bits() ^ 1)]);
        assert_ne!(a.value, d.value, "one ulp changes it");
        assert_eq!(Hash::default().value, None);
    }
}
