//! Dense (f32) weights: `y = x · W`, with `W` repacked at load into column panels.
//!
//! ONNX MatMul keeps `W` as `[k, n]`. At load it becomes panels of [`PANEL`] output columns:
//! `k` is zero padded to `kp` (a multiple of 16) and cut into 16-value chunks, and a panel stores,
//! chunk after chunk, the [`PANEL`] columns' 16 values of that chunk (`[n / 4][kp / 16][4][16]`;
//! a partial last panel is padded with zero columns). A panel is read front to back by every
//! kernel, and a thread's panels are contiguous.
//!
//! Every output element is computed in 16 lanes (element `i` of a row goes to lane `i % 16`, one
//! fused multiply-add per element, in increasing `i`) then summed in the canonical order
//! ([`hsum16`]). Decode (`m == 1`, [`gemv_parallel`]: memory bound, several streams per thread)
//! and prefill (`m > 1`, [`matmul_cols`]: a register-blocked, cache-blocked GEMM) both keep that
//! order, whatever the tile shape, the cache blocking (a k block hands its 16 lane sums on to the
//! next unchanged), the instruction set or the thread split, so a row gives the same bits alone
//! or in a batch.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use super::dense_panel::{Kernels, PANEL, PCHUNK, Strip};
use super::rows::{Rows, round_up};
use crate::cpu::kernels::aligned::Aligned;
use crate::cpu::kernels::isa::Isa;
use crate::cpu::kernels::math::{LANES, hsum16};
use crate::cpu::threads::ThreadPool;
use crate::error::{Error, check_len, mul};

/// A dense weight prepared for [`super::linear`]: column panels of f32 (see the module docs).
#[derive(Clone)]
pub struct DenseWeight {
    k: usize,
    n: usize,
    kp: usize,
    data: Aligned<f32>,
}

impl std::fmt::Debug for DenseWeight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseWeight")
            .field("k", &self.k)
            .field("n", &self.n)
            .finish()
    }
}

impl DenseWeight {
    /// From ONNX MatMul's `[k, n]` row-major f32 data.
    pub fn from_f32(k: usize, n: usize, data_kn: &[f32]) -> Result<Self, Error> {
        Self::build(k, n, data_kn, |v| v)
    }

    /// From `[k, n]` IEEE half-precision bits (converted exactly to f32).
    pub fn from_f16_bits(k: usize, n: usize, data_kn: &[u16]) -> Result<Self, Error> {
        Self::build(k, n, data_kn, |b| half::f16::from_bits(b).to_f32())
    }

    /// From `[k, n]` bfloat16 bits (converted exactly to f32).
    pub fn from_bf16_bits(k: usize, n: usize, data_kn: &[u16]) -> Result<Self, Error> {
        Self::build(k, n, data_kn, |b| half::bf16::from_bits(b).to_f32())
    }

    /// Input features.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Output features.
    pub fn n(&self) -> usize {
        self.n
    }

    pub(crate) fn kp(&self) -> usize {
        self.kp
    }

    /// Panels `g` onwards (each `PANEL * kp` floats).
    fn panels_from(&self, g: usize) -> &[f32] {
        &self.data.as_slice()[g * PANEL * self.kp..]
    }

    fn build<T: Copy>(
        k: usize,
        n: usize,
        src: &[T],
        cvt: impl Fn(T) -> f32,
    ) -> Result<Self, Error> {
        check_len("weight", mul("weight", k, n)?, src.len())?;
        let kp = round_up(k, LANES);
        let np = round_up(n, PANEL);
        let mut data = Aligned::zeroed(mul("weight", np, kp)?);
        let dst = data.as_mut_slice();
        // 16 source rows (one chunk) at a time: they are read in parallel, left to right, and
        // each column's 16 values land in one 64-byte line of the destination.
        for (t, i0) in (0..k).step_by(LANES).enumerate() {
            let rows = (k - i0).min(LANES);
            for c in 0..n {
                let at = (c / PANEL) * PANEL * kp + t * PCHUNK + (c % PANEL) * LANES;
                let line = &mut dst[at..at + rows];
                for (j, d) in line.iter_mut().enumerate() {
                    *d = cvt(src[(i0 + j) * n + c]);
                }
            }
        }
        Ok(Self { k, n, kp, data })
    }
}

/// Prefill (`x.len() > 1` rows): `out[r][c - cols.start] = x_r · W_c (+ bias[c])` for the
/// columns in `cols` (`cols.start` a multiple of [`PANEL`]); `x` rows are `kp` long (zero
/// padded).
pub(crate) fn matmul_cols(
    isa: Isa,
    w: &DenseWeight,
    x: &Rows<'_, f32>,
    bias: Option<&[f32]>,
    cols: Range<usize>,
    out: &mut [&mut [f32]],
) {
    assert!(cols.start.is_multiple_of(PANEL) && cols.end <= w.n);
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Avx512 | Isa::Avx512Vnni => {
            return gemm(&super::dense_x86::Avx512::new(isa), w, x, bias, cols, out);
        }
        Isa::Avx2 => return gemm(&super::dense_x86::Avx2::new(isa), w, x, bias, cols, out),
        Isa::Scalar => {}
    }
    let _ = isa;
    gemm(&Portable, w, x, bias, cols, out)
}

/// Decode: `y = x · W (+ bias)` for one row `x` (`kp` long, zero padded) on `parts` threads of
/// `pool`.
///
/// Part `p` owns the columns `bounds[p]..bounds[p + 1]` (multiples of [`PANEL`] inside), cut
/// into [`GEMV_STREAMS`] contiguous ranges of panels that it reads side by side, one panel of
/// each per step, so each range is one memory stream. Steps are claimed one at a time from the
/// front by the owner and, once a thread has finished its own part, from the back by the others:
/// a thread that the machine slows down does not hold up the call. Every output is computed by
/// the same instructions whichever thread claims it, so results do not depend on the timing.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemv_parallel(
    isa: Isa,
    w: &DenseWeight,
    x: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    pool: &ThreadPool,
    bounds: &[usize],
) {
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Avx512 | Isa::Avx512Vnni => {
            let k = super::dense_x86::Avx512::new(isa);
            return gemv_threads(&k, w, x, bias, y, pool, bounds);
        }
        Isa::Avx2 => {
            let k = super::dense_x86::Avx2::new(isa);
            return gemv_threads(&k, w, x, bias, y, pool, bounds);
        }
        Isa::Scalar => {}
    }
    let _ = isa;
    gemv_threads(&Portable, w, x, bias, y, pool, bounds)
}

/// The portable kernels.
struct Portable;

impl Kernels for Portable {
    fn gemv<const S: usize>(
        &self,
        x: &[f32],
        w: &[f32],
        kp: usize,
        starts: [usize; S],
    ) -> [[f32; PANEL]; S] {
        starts.map(|at| {
            let panel = &w[at..at + PANEL * kp];
            let mut acc = [[0f32; LANES]; PANEL];
            for (xc, wc) in x.chunks_exact(LANES).zip(panel.chunks_exact(PCHUNK)) {
                for (a, wl) in acc.iter_mut().zip(wc.chunks_exact(LANES)) {
                    for j in 0..LANES {
                        a[j] = wl[j].mul_add(xc[j], a[j]);
                    }
                }
            }
            acc.map(|a| hsum16(&a))
        })
    }

    fn strip<const C: usize>(&self, s: Strip<'_, '_>) {
        s.check::<C>();
        for r in 0..s.rows {
            let mut acc = [[0f32; LANES]; C];
            if !s.first {
                for (c, a) in acc.iter_mut().enumerate() {
                    a.copy_from_slice(&s.acc[Strip::acc_at::<C>(r, c)..][..LANES]);
                }
            }
            for ch in 0..s.chunks {
                let xc = &s.x[r * s.x_stride + ch * LANES..][..LANES];
                for (c, a) in acc.iter_mut().enumerate() {
                    let at = (c / PANEL) * s.w_stride + ch * PCHUNK + (c % PANEL) * LANES;
                    let wl = &s.w[at..at + LANES];
                    for j in 0..LANES {
                        a[j] = wl[j].mul_add(xc[j], a[j]);
                    }
                }
            }
            if s.last {
                let dst = &mut s.out[r][s.col..s.col + C];
                for (c, (d, a)) in dst.iter_mut().zip(&acc).enumerate() {
                    *d = hsum16(a) + s.bias.map_or(0.0, |b| b[c]);
                }
            } else {
                for (c, a) in acc.iter().enumerate() {
                    s.acc[Strip::acc_at::<C>(r, c)..][..LANES].copy_from_slice(a);
                }
            }
        }
    }

    const ROWS: usize = 3;
}

/// Memory streams of the decode GEMV per thread: more streams keep more DRAM reads in flight
/// (measured on 2 cores of a Xeon: one stream ~30 GB/s, 6 streams ~37 GB/s for 2 threads).
const GEMV_STREAMS: usize = 6;

/// One part of the decode GEMV: `panels` panels from panel `g0`, as [`GEMV_STREAMS`] ranges.
/// Its units, in the owner's order: steps `0..q` (panel `first[s] + step` of every range),
/// then the last panels of the first `panels % GEMV_STREAMS` ranges (one longer than the
/// rest), one by one.
struct GemvPart {
    g0: usize,
    first: [usize; GEMV_STREAMS],
    q: usize,
    /// `front << 32 | back`: units `front..back` are unclaimed.
    claim: AtomicU64,
}

impl GemvPart {
    fn new(g0: usize, panels: usize) -> Self {
        const S: usize = GEMV_STREAMS;
        let (q, extra) = (panels / S, panels % S);
        let units = q + extra;
        assert!(units < 1 << 32, "too many panels");
        Self {
            g0,
            first: std::array::from_fn(|s| s * q + s.min(extra)),
            q,
            claim: AtomicU64::new(units as u64),
        }
    }

    /// Claims the next unit from the front (`owner`) or the back.
    fn claim(&self, owner: bool) -> Option<usize> {
        let mut cur = self.claim.load(Ordering::Relaxed);
        loop {
            let (front, back) = (cur >> 32, cur & 0xFFFF_FFFF);
            if front >= back {
                return None;
            }
            let (next, unit) = if owner {
                (((front + 1) << 32) | back, front)
            } else {
                ((front << 32) | (back - 1), back - 1)
            };
            match self
                .claim
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(unit as usize),
                Err(seen) => cur = seen,
            }
        }
    }
}

/// `y`, written by several threads at columns that the claims keep disjoint.
struct SharedOut {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: every column is written by the one thread that claimed its unit, and the buffer
// outlives the parallel call (it is borrowed mutably for its whole duration).
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// `y[at + c] = v[c] + bias` for the `v` that fall inside `y`.
    ///
    /// # Safety
    /// No other thread may access `y[at..at + PANEL]` during the call.
    unsafe fn put(&self, at: usize, v: &[f32; PANEL], bias: Option<&[f32]>) {
        for (c, &v) in v.iter().enumerate().take(self.len.saturating_sub(at)) {
            // `+ 0.0` without a bias, as in the prefill kernels: a row gives the same bits
            // alone or in a batch.
            let b = bias.map_or(0.0, |b| b[at + c]);
            // SAFETY: at + c < len, and the caller guarantees exclusive access.
            unsafe { *self.ptr.add(at + c) = v + b };
        }
    }
}

fn gemv_threads<K: Kernels>(
    kern: &K,
    w: &DenseWeight,
    x: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    pool: &ThreadPool,
    bounds: &[usize],
) {
    let kp = w.kp;
    let parts: Vec<GemvPart> = bounds
        .windows(2)
        .map(|b| {
            let g0 = b[0] / PANEL;
            GemvPart::new(g0, b[1].div_ceil(PANEL) - g0)
        })
        .collect();
    let out = SharedOut {
        ptr: y.as_mut_ptr(),
        len: y.len(),
    };
    let wp = w.data.as_slice();
    let run = |part: &GemvPart, unit: usize| {
        let panel_at = |rel: usize| (part.g0 + rel) * PANEL;
        if unit < part.q {
            let res = kern.gemv(x, wp, kp, part.first.map(|f| panel_at(f + unit) * kp));
            for (f, v) in part.first.iter().zip(&res) {
                // SAFETY: the unit was claimed once, and its panels belong to it alone.
                unsafe { out.put(panel_at(f + unit), v, bias) };
            }
        } else {
            let panel = part.first[unit - part.q] + part.q;
            let [v] = kern.gemv(x, wp, kp, [panel_at(panel) * kp]);
            // SAFETY: as above.
            unsafe { out.put(panel_at(panel), &v, bias) };
        }
    };
    pool.for_parts(parts.len(), |p| {
        while let Some(u) = parts[p].claim(true) {
            run(&parts[p], u);
        }
        for other in (1..parts.len()).map(|i| (p + i) % parts.len()) {
            while let Some(u) = parts[other].claim(false) {
                run(&parts[other], u);
            }
        }
    });
}

/// Bytes of `x` a row block may hold (about half of a 2 MB L2 cache): the block's rows are
/// reused from L2 for every panel pair, and the panels stream once per row block.
const ROW_BLOCK_BYTES: usize = 1 << 20;
/// Chunks of 16 values per k block: a pair of panels over one k block (8 columns, 28 KB at
/// k = 896) stays in L1 while every row tile of the block passes over it.
const K_BLOCK_CHUNKS: usize = 56;

/// `0..len` cut into `ceil(len / max)` nearly equal pieces, each a multiple of `unit` except the
/// last.
fn blocks(len: usize, max: usize, unit: usize) -> Vec<Range<usize>> {
    let count = len.div_ceil(max.max(1)).max(1);
    let step = round_up(len.div_ceil(count), unit).max(unit);
    (0..len)
        .step_by(step)
        .map(|s| s..(s + step).min(len))
        .collect()
}

/// Prefill: for each row block, for each strip of 8 columns (a pair of panels; the last one
/// may be a single panel), for each k block: the strip kernel, which carries lane sums across k
/// blocks in a buffer and writes the outputs after the last.
fn gemm<K: Kernels>(
    kern: &K,
    w: &DenseWeight,
    x: &Rows<'_, f32>,
    bias: Option<&[f32]>,
    cols: Range<usize>,
    out: &mut [&mut [f32]],
) {
    let (kp, m) = (w.kp, x.len());
    let chunks = kp / LANES;
    let rows_max = (ROW_BLOCK_BYTES / (kp * 4)).max(K::ROWS);
    let row_blocks = blocks(m, rows_max, K::ROWS);
    let k_blocks = blocks(chunks, K_BLOCK_CHUNKS, 1);
    let split = k_blocks.len() > 1;
    let mut acc = Aligned::<f32>::zeroed(if split {
        row_blocks[0].len() * 2 * PCHUNK
    } else {
        0
    });
    let g0 = cols.start / PANEL;
    let panels = cols.end.div_ceil(PANEL) - g0;
    let w_stride = PANEL * kp;
    let wp = w.panels_from(g0);
    // Strips: (first panel, panels in it).
    let strips: Vec<(usize, usize)> = (0..panels)
        .step_by(2)
        .map(|g| (g, (panels - g).min(2)))
        .collect();
    let mut tmp_out = Vec::new();
    for rb in &row_blocks {
        let rows = rb.len();
        let out_rows = &mut out[rb.clone()];
        for (si, &(g, np)) in strips.iter().enumerate() {
            let c0 = (g0 + g) * PANEL;
            let width = (cols.end - c0).min(np * PANEL);
            // A strip with padding columns writes into a scratch block, then keeps `width`.
            let partial = width < np * PANEL;
            let mut bias_pad = [0f32; 2 * PANEL];
            if let Some(b) = bias {
                bias_pad[..width].copy_from_slice(&b[c0..c0 + width]);
            }
            let strip_bias = bias.map(|_| &bias_pad[..np * PANEL]);
            if partial {
                tmp_out = vec![0f32; rows * np * PANEL];
            }
            for (kbi, kb) in k_blocks.iter().enumerate() {
                // The weights of the strip and k block that run next (one range per panel),
                // to prefetch.
                let next = match (k_blocks.get(kbi + 1), strips.get(si + 1)) {
                    (Some(nkb), _) => Some((g, np, nkb)),
                    (None, Some(&(ng, nnp))) => Some((ng, nnp, &k_blocks[0])),
                    (None, None) => None,
                };
                let next: [&[f32]; 2] = std::array::from_fn(|i| match next {
                    Some((ng, nnp, nkb)) if i < nnp => {
                        &wp[(ng + i) * w_stride + nkb.start * PCHUNK..][..nkb.len() * PCHUNK]
                    }
                    _ => &[],
                });
                macro_rules! launch {
                    ($dst:expr, $col:expr) => {{
                        let s = Strip {
                            x: &x.data[rb.start * x.stride + kb.start * LANES..],
                            x_stride: x.stride,
                            rows,
                            w: &wp[g * w_stride + kb.start * PCHUNK..],
                            w_stride,
                            chunks: kb.len(),
                            acc: acc.as_mut_slice(),
                            first: kbi == 0,
                            last: kbi + 1 == k_blocks.len(),
                            out: $dst,
                            col: $col,
                            bias: strip_bias,
                            next,
                        };
                        if np == 2 {
                            kern.strip::<8>(s);
                        } else {
                            kern.strip::<4>(s);
                        }
                    }};
                }
                if partial {
                    let mut tmp_rows: Vec<&mut [f32]> = tmp_out.chunks_mut(np * PANEL).collect();
                    launch!(&mut tmp_rows, 0);
                } else {
                    launch!(&mut *out_rows, c0 - cols.start);
                }
            }
            if partial {
                for (dst, src) in out_rows.iter_mut().zip(tmp_out.chunks(np * PANEL)) {
                    dst[c0 - cols.start..][..width].copy_from_slice(&src[..width]);
                }
            }
        }
    }
}
