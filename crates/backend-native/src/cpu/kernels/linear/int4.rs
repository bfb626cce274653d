//! com.microsoft MatMulNBits (4 bits) weights: validation and repacking (the per-column driver
//! is in `int4_matmul.rs`).
//!
//! ONNX layout: `B` is uint8 `[N, nb, block/2]` (nb = ceil(K/block), two values per byte, low
//! nibble first along K), `scales` `[N * nb]`, optional `zero_points` either uint8 `[N,
//! ceil(nb/2)]` (4-bit, low nibble first) or in the scales' type `[N * nb]`; the default zero
//! point is 8. The dequantized weight of column n, row k is `(q - zp) * scale`.
//!
//! Our layout: each column is padded with zero blocks to `kp` values (a multiple of 128 and of
//! the block size) and split into 128-value chunks of 64 bytes. Lane `i` (0..16) of a chunk
//! holds values `8i..8i+8`: byte `4i + j` carries value `8i + j` in its low nibble and `8i + 4 +
//! j` in its high one. One 64-byte load then unpacks (mask, shift) into two 64-byte vectors
//! whose 32-bit lanes each cover 4 consecutive values of one block — what `vpdpbusd`/
//! `vpmaddubsw` need — and two 32-bit interleaves recover natural order for the f32 path.
//!
//! Compute types follow ONNX Runtime's CPU kernel: `accuracy_level == 4` quantizes activations
//! to int8 per block (see `int4_quant`) and accumulates integer products ("CompInt8"); levels
//! 0-3 dequantize to f32 and use fused multiply-adds ("CompFp32"). Zero points stored in the
//! scales' float type always compute in f32, as ONNX Runtime then dequantizes B up front too.

use super::rows::round_up;
use crate::cpu::kernels::aligned::Aligned;
use crate::error::{Error, check_len, invalid, mul};

/// MatMulNBits scales, as stored in the model.
#[derive(Debug, Clone, Copy)]
pub enum Scales<'a> {
    /// float scales `[N * nb]`.
    F32(&'a [f32]),
    /// float16 scales as bits.
    F16Bits(&'a [u16]),
    /// bfloat16 scales as bits.
    Bf16Bits(&'a [u16]),
}

/// MatMulNBits zero points, as stored in the model.
#[derive(Debug, Clone, Copy)]
pub enum ZeroPoints<'a> {
    /// uint8 `[N, ceil(nb / 2)]`, two 4-bit zero points per byte, low nibble first.
    Packed4(&'a [u8]),
    /// float `[N * nb]` (the scales' type).
    F32(&'a [f32]),
    /// float16 bits `[N * nb]` (the scales' type).
    F16Bits(&'a [u16]),
}

/// How an [`Int4Weight`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Int4Compute {
    /// Dequantize to f32, f32 fused multiply-adds (ONNX Runtime's CompFp32).
    Fp32,
    /// Activations quantized to int8 per block, int32 dot products (ONNX Runtime's CompInt8).
    Int8,
}

/// Zero points in the form the compute type reads.
#[derive(Debug, Clone)]
pub(crate) enum Zp {
    /// All 8 (no zero-point input).
    Default,
    /// `[n, nbp]` bytes plus 8 padding bytes (int8 compute).
    U8(Vec<u8>),
    /// `[n, nbp]` floats (f32 compute).
    F32(Vec<f32>),
}

/// A MatMulNBits weight prepared for [`super::linear`].
#[derive(Clone)]
pub struct Int4Weight {
    pub(crate) k: usize,
    pub(crate) n: usize,
    pub(crate) block_size: usize,
    accuracy_level: u8,
    pub(crate) compute: Int4Compute,
    /// Padded K: a multiple of 128 and of `block_size`.
    pub(crate) kp: usize,
    /// Blocks per column after padding (`kp / block_size`).
    pub(crate) nbp: usize,
    /// `[n, kp / 2]` in the lane layout described above.
    pub(crate) data: Aligned<u8>,
    /// `[n, nbp]`, zero for padding blocks.
    pub(crate) scales: Vec<f32>,
    pub(crate) zp: Zp,
    /// `log2(block_size)`.
    pub(crate) block_shift: u32,
    /// For blocks under 128 values: the block (within its chunk) of each of a chunk's 16 lanes.
    pub(crate) lane_block: [i32; 16],
}

impl std::fmt::Debug for Int4Weight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Int4Weight")
            .field("k", &self.k)
            .field("n", &self.n)
            .field("block_size", &self.block_size)
            .field("accuracy_level", &self.accuracy_level)
            .field("compute", &self.compute)
            .finish()
    }
}

/// Chunk of K values that one 64-byte load covers.
pub(crate) const CHUNK: usize = 128;

impl Int4Weight {
    /// Validates and repacks a MatMulNBits weight (attributes `K`, `N`, `block_size`,
    /// `accuracy_level`; inputs `B`, `scales`, optional `zero_points`).
    pub fn new(
        k: usize,
        n: usize,
        block_size: usize,
        accuracy_level: i64,
        packed: &[u8],
        scales: Scales<'_>,
        zero_points: Option<ZeroPoints<'_>>,
    ) -> Result<Self, Error> {
        if ![16, 32, 64, 128, 256].contains(&block_size) {
            return Err(invalid(
                "block_size",
                format!("{block_size} is not 16, 32, 64, 128 or 256"),
            ));
        }
        let accuracy_level = u8::try_from(accuracy_level)
            .ok()
            .filter(|l| *l <= 4)
            .ok_or_else(|| {
                invalid(
                    "accuracy_level",
                    format!("{accuracy_level} is not in 0..=4"),
                )
            })?;
        if k == 0 {
            return Err(invalid("K", "must be positive"));
        }
        let nb = k.div_ceil(block_size);
        let blob = block_size / 2;
        check_len("B", mul("B", mul("B", n, nb)?, blob)?, packed.len())?;
        let nblocks = mul("scales", n, nb)?;
        let scales_f32: Vec<f32> = match scales {
            Scales::F32(s) => {
                check_len("scales", nblocks, s.len())?;
                s.to_vec()
            }
            Scales::F16Bits(s) => {
                check_len("scales", nblocks, s.len())?;
                s.iter()
                    .map(|&b| half::f16::from_bits(b).to_f32())
                    .collect()
            }
            Scales::Bf16Bits(s) => {
                check_len("scales", nblocks, s.len())?;
                s.iter()
                    .map(|&b| half::bf16::from_bits(b).to_f32())
                    .collect()
            }
        };
        // Zero points per block as f32 (float inputs) or u8 (packed input), unpadded.
        let zp_float: Option<Vec<f32>> = match zero_points {
            Some(ZeroPoints::F32(z)) => {
                check_len("zero_points", nblocks, z.len())?;
                Some(z.to_vec())
            }
            Some(ZeroPoints::F16Bits(z)) => {
                check_len("zero_points", nblocks, z.len())?;
                Some(
                    z.iter()
                        .map(|&b| half::f16::from_bits(b).to_f32())
                        .collect(),
                )
            }
            _ => None,
        };
        let zp_u8: Option<Vec<u8>> = match zero_points {
            Some(ZeroPoints::Packed4(z)) => {
                let per_col = nb.div_ceil(2);
                check_len("zero_points", mul("zero_points", n, per_col)?, z.len())?;
                let mut out = Vec::with_capacity(nblocks);
                for col in z.chunks(per_col) {
                    out.extend((0..nb).map(|b| (col[b / 2] >> (4 * (b % 2))) & 0x0F));
                }
                Some(out)
            }
            _ => None,
        };
        let compute = if accuracy_level == 4 && zp_float.is_none() {
            Int4Compute::Int8
        } else {
            Int4Compute::Fp32
        };

        let kp = round_up(nb * block_size, CHUNK);
        let nbp = kp / block_size;
        let col_bytes = kp / 2;
        let mut data = Aligned::zeroed(mul("B", n, col_bytes)?);
        for (c, dst) in data.as_mut_slice().chunks_mut(col_bytes).enumerate() {
            let src = &packed[c * nb * blob..(c + 1) * nb * blob];
            for e in 0..nb * block_size {
                let q = (src[e / 2] >> (4 * (e % 2))) & 0x0F;
                let (byte, shift) = lane_position(e);
                dst[byte] |= q << shift;
            }
        }
        let mut scales = vec![0f32; n * nbp];
        for (dst, src) in scales.chunks_mut(nbp).zip(scales_f32.chunks(nb)) {
            dst[..nb].copy_from_slice(src);
        }
        let pad = |vals: Vec<f32>, fill: f32| {
            let mut out = vec![fill; n * nbp];
            for (dst, src) in out.chunks_mut(nbp).zip(vals.chunks(nb)) {
                dst[..nb].copy_from_slice(src);
            }
            out
        };
        let zp = match (compute, zp_float, zp_u8) {
            (_, Some(z), _) => Zp::F32(pad(z, 0.0)),
            (Int4Compute::Fp32, None, Some(z)) => {
                Zp::F32(pad(z.into_iter().map(f32::from).collect(), 8.0))
            }
            (Int4Compute::Int8, None, Some(z)) => {
                let mut out = vec![8u8; n * nbp + 8];
                for (dst, src) in out.chunks_mut(nbp).zip(z.chunks(nb)) {
                    dst[..nb].copy_from_slice(src);
                }
                Zp::U8(out)
            }
            (_, None, None) => Zp::Default,
        };
        Ok(Self {
            k,
            n,
            block_size,
            accuracy_level,
            compute,
            kp,
            nbp,
            data,
            scales,
            zp,
            block_shift: block_size.trailing_zeros(),
            lane_block: std::array::from_fn(|i| {
                if block_size < CHUNK {
                    (i / (block_size / 8)) as i32
                } else {
                    0
                }
            }),
        })
    }

    /// Input features (`K`).
    pub fn k(&self) -> usize {
        self.k
    }

    /// Output features (`N`).
    pub fn n(&self) -> usize {
        self.n
    }

    /// The quantization block size.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// The `accuracy_level` attribute it was built with.
    pub fn accuracy_level(&self) -> u8 {
        self.accuracy_level
    }

    /// How it computes (int8 for accuracy level 4 unless zero points are floats).
    pub fn compute(&self) -> Int4Compute {
        self.compute
    }

    /// Bytes of repacked weight data, scales and zero points held.
    pub fn size_bytes(&self) -> usize {
        let zp = match &self.zp {
            Zp::Default => 0,
            Zp::U8(z) => z.len(),
            Zp::F32(z) => z.len() * 4,
        };
        self.data.len() + self.scales.len() * 4 + zp
    }

    pub(crate) fn col_data(&self, c: usize) -> &[u8] {
        &self.data.as_slice()[c * self.kp / 2..(c + 1) * self.kp / 2]
    }

    pub(crate) fn col_scales(&self, c: usize) -> &[f32] {
        &self.scales[c * self.nbp..(c + 1) * self.nbp]
    }

    /// Column `c`'s u8 zero points followed by at least 8 readable bytes (int8 compute only).
    pub(crate) fn col_zp_u8(&self, c: usize) -> Option<&[u8]> {
        match &self.zp {
            Zp::U8(z) => Some(&z[c * self.nbp..(c + 1) * self.nbp + 8]),
            _ => None,
        }
    }

    /// Column `c`'s float zero points (f32 compute only; `None` means all 8).
    pub(crate) fn col_zp_f32(&self, c: usize) -> Option<&[f32]> {
        match &self.zp {
            Zp::F32(z) => Some(&z[c * self.nbp..(c + 1) * self.nbp]),
            _ => None,
        }
    }

    /// The 4-bit value at row `e` of column `c` (for tests and references).
    #[cfg(test)]
    pub(crate) fn q(&self, c: usize, e: usize) -> u8 {
        let (byte, shift) = lane_position(e);
        (self.col_data(c)[byte] >> shift) & 0x0F
    }
}

/// Byte index within a column and nibble shift of value `e` in the lane layout.
#[inline]
pub(crate) fn lane_position(e: usize) -> (usize, u32) {
    let (chunk, w) = (e / CHUNK, e % CHUNK);
    let (lane, j) = (w / 8, w % 8);
    (chunk * 64 + 4 * lane + j % 4, if j < 4 { 0 } else { 4 })
}
