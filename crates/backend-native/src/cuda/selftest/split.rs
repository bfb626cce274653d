//! The norm's output split into f16 halves (`skip_norm_split_f32`) against the host's split of
//! the same row, and the norm's output and residual against the plain launch's, bit for bit.
//! The host split is also what `int4.rs` hands the tensor-core GEMV in place of its own stage.

use super::{Check, Ctx, Rng};
use crate::cuda::kernels::split_bytes;
use crate::cuda::memory::DevBuf;
use crate::error::Error;
use half::f16;

/// The exponent e putting the row's largest magnitude `m` in [2^14, 2^15) (`split_exponent`
/// in kernels/prelude.cuh).
fn exponent(m: f32) -> i32 {
    if m > 0.0 && m <= 3.0e38 {
        (((m.to_bits() >> 23) & 0xff) as i32 - 141).clamp(-100, 100)
    } else {
        0
    }
}

/// Where value `at` of a row sits among its word's eight halves (`split_slot`).
fn slot(at: usize) -> usize {
    (at & !7) + 2 * (at & 3) + ((at >> 2) & 1)
}

/// `x` split as the device writes it: hi halves, lo halves (each `split_stride` words of 8),
/// then 2^e in the first two halves of one more word.
pub(super) fn host_split(x: &[f32]) -> Vec<u16> {
    let halves = split_bytes(x.len()) / 2;
    let slots = (halves - 8) / 2;
    let mut out = vec![0u16; halves];
    let e = exponent(x.iter().fold(0f32, |m, v| m.max(v.abs())));
    let down = f32::from_bits(((127 - e) as u32) << 23);
    for (at, &v) in x.iter().enumerate() {
        let s = v * down;
        let hi = f16::from_f32(s);
        out[slot(at)] = hi.to_bits();
        out[slots + slot(at)] = f16::from_f32(s - hi.to_f32()).to_bits();
    }
    let up = f32::from_bits(((127 + e) as u32) << 23).to_bits();
    out[2 * slots] = up as u16;
    out[2 * slots + 1] = (up >> 16) as u16;
    out
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// One row through `skip_norm_f32` and `skip_norm_split_f32`: widths from 3 to the limit,
/// RMS and LayerNorm, with and without the residual's delta, the three activation roundings,
/// rows scaled up and down (other exponents) and a zero row (e = 0).
pub(super) fn checks(c: &Ctx, rng: &mut Rng) -> Result<Vec<Check>, Error> {
    let cases = [
        (896, true, 0, true, 1.0),
        (1000, false, 1, true, 300.0),
        (1536, true, 2, false, 1.0e-3),
        (4096, true, 1, true, 1.0),
        (8192, false, 0, true, 4.0),
        (3, true, 0, true, 1.0),
        (896, true, 0, false, 0.0),
    ];
    let mut checks = Vec::new();
    for (width, rms, act, with_delta, scale) in cases {
        let x: Vec<f32> = rng.vec(width).iter().map(|v| v * scale).collect();
        let delta = rng.vec(width);
        let weight: Vec<f32> = rng.vec(width).iter().map(|v| 1.0 + v).collect();
        let bias = rng.vec(width);
        let (dd, dw, db) = (c.up(&delta)?, c.up(&weight)?, c.up(&bias)?);
        let delta_ptr = if with_delta { dd.ptr } else { 0 };
        let bias_ptr = if rms { 0 } else { db.ptr };
        let eps = 1e-6;
        let (x1, out1) = (c.up(&x)?, DevBuf::<f32>::zeros(&c.stream, width)?);
        let rows = (1, width, 1, width);
        c.ops().skip_norm(
            x1.ptr, delta_ptr, dw.ptr, bias_ptr, out1.ptr, rows, eps, rms, true, act,
        )?;
        let (x2, out2) = (c.up(&x)?, DevBuf::<f32>::zeros(&c.stream, width)?);
        let split = DevBuf::<u16>::zeros(&c.stream, split_bytes(width) / 2)?;
        c.ops().skip_norm_split(
            (x2.ptr, delta_ptr),
            (dw.ptr, bias_ptr),
            out2.ptr,
            split.ptr,
            width,
            (eps, rms),
            act,
        )?;
        let (o1, o2) = (c.down(&out1, width)?, c.down(&out2, width)?);
        let (r1, r2) = (c.down(&x1, width)?, c.down(&x2, width)?);
        let halves = c.down(&split, split_bytes(width) / 2)?;
        let same = bits(&o1) == bits(&o2) && bits(&r1) == bits(&r2);
        let split_ok = halves == host_split(&o2);
        checks.push(Check {
            name: format!(
                "skip_norm split width {width} {} act {act}{} x{scale}: out and residual {}, \
                 halves {}",
                if rms { "rms" } else { "layernorm" },
                if with_delta { " +delta" } else { "" },
                if same { "bitwise equal" } else { "DIFFERENT" },
                if split_ok {
                    "as the host splits"
                } else {
                    "DIFFERENT"
                },
            ),
            rel_diff: if same && split_ok { 0.0 } else { f32::INFINITY },
            limit: 0.0,
        });
    }
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use super::{exponent, host_split, slot};

    #[test]
    fn slots_follow_the_mma_pairs_of_a_word() {
        let word: Vec<usize> = (0..8).map(slot).collect();
        // Values 0..8 of a word sit at halves 0, 2, 4, 6, 1, 3, 5, 7 (pairs (0,4), (1,5), ...).
        assert_eq!(word, [0, 2, 4, 6, 1, 3, 5, 7]);
        assert_eq!(slot(8 + 5), 8 + 3);
    }

    #[test]
    fn the_exponent_puts_the_largest_value_below_2_to_15() {
        for m in [1.0f32, 0.3, 7.5e4, 1.0e-20] {
            let scaled = m * f32::from_bits(((127 - exponent(m)) as u32) << 23);
            assert!((16384.0..32768.0).contains(&scaled), "{m} -> {scaled}");
        }
        assert_eq!(exponent(0.0), 0);
        assert_eq!(exponent(f32::INFINITY), 0);
        assert_eq!(exponent(f32::NAN), 0);
    }

    #[test]
    fn a_split_row_adds_back_up_to_its_values() {
        let x = [1.5f32, -0.001, 3.0e-4, 2.0, 0.0, -7.25, 0.1, 1.0e-3, 0.5];
        let out = host_split(&x);
        let slots = (out.len() - 8) / 2;
        let up = f32::from_bits(u32::from(out[2 * slots]) | (u32::from(out[2 * slots + 1]) << 16));
        for (at, &v) in x.iter().enumerate() {
            let hi = half::f16::from_bits(out[slot(at)]).to_f32();
            let lo = half::f16::from_bits(out[slots + slot(at)]).to_f32();
            let back = (hi + lo) * up;
            assert!((back - v).abs() <= v.abs() * 1e-6, "{v} -> {back}");
        }
        // Past the row: zeros.
        assert!((x.len()..slots).all(|at| out[slot(at)] == 0 && out[slots + slot(at)] == 0));
    }
}
