//! CPU checks of the GEMM plumbing: the column-major call computes our row-major product, the
//! scratch sizing, the dense kernels' types, and a missing cuBLAS reported without a panic.

use super::handle::cublas_available;
use super::handle::{ColMajor, GemmScratch, WORKSPACE_BYTES};
use super::slices::dequant_cols_in;
use crate::cuda::kernels::{CHUNK, GemmType, HalfCopy, common_half};

/// The default slice width (`CudaTuning::dequant_values`).
const DEQUANT: usize = crate::settings::DEQUANT_DEFAULT_MI << 20;

/// `C = op(A) · op(B)` by the BLAS definition: element (i, j) of a column-major matrix with
/// leading dimension `ld` is at `i + j * ld`.
fn blas_gemm(g: &ColMajor, a: &[f32], b: &[f32], c: &mut [f32]) {
    let (m, n, k) = (g.m as usize, g.n as usize, g.k as usize);
    let (lda, ldb, ldc) = (g.lda as usize, g.ldb as usize, g.ldc as usize);
    for j in 0..n {
        for i in 0..m {
            let mut sum = 0.0;
            for l in 0..k {
                let av = if g.trans_a {
                    a[l + i * lda]
                } else {
                    a[i + l * lda]
                };
                let bv = if g.trans_b {
                    b[j + l * ldb]
                } else {
                    b[l + j * ldb]
                };
                sum += av * bv;
            }
            c[i + j * ldc] = sum;
        }
    }
}

#[test]
fn the_column_major_call_computes_the_row_major_product() {
    for &(rows, k, n, ldx, ldy) in &[(3, 5, 4, 5, 4), (2, 7, 3, 9, 11), (4, 1, 6, 3, 6)] {
        // Small integers: every sum is exact, so the two orders agree bit for bit.
        let x: Vec<f32> = (0..rows * ldx).map(|i| (i % 7) as f32 - 3.0).collect();
        let w: Vec<f32> = (0..n * k).map(|i| (i % 5) as f32 - 2.0).collect();
        const UNTOUCHED: f32 = 12345.0;
        let mut want = vec![UNTOUCHED; rows * ldy];
        for r in 0..rows {
            for j in 0..n {
                want[r * ldy + j] = (0..k).map(|l| x[r * ldx + l] * w[j * k + l]).sum();
            }
        }
        let g = ColMajor::of(rows, k, n, ldx, ldy).expect("valid shape");
        assert_eq!((g.m, g.n, g.k), (n as i32, rows as i32, k as i32));
        let mut got = vec![UNTOUCHED; rows * ldy];
        blas_gemm(&g, &w, &x, &mut got);
        assert_eq!(got, want, "rows {rows} k {k} n {n} ldx {ldx} ldy {ldy}");
    }
}

#[test]
fn bad_shapes_are_errors() {
    assert!(ColMajor::of(0, 4, 4, 4, 4).is_err());
    assert!(ColMajor::of(2, 0, 4, 4, 4).is_err());
    assert!(ColMajor::of(2, 4, 4, 3, 4).is_err()); // ldx < k
    assert!(ColMajor::of(2, 4, 4, 4, 3).is_err()); // ldy < n
    assert!(ColMajor::of(2, 4, 1 << 31, 4, 1 << 31).is_err()); // past a 32-bit int
}

#[test]
fn the_scratch_fits_the_widest_layers_of_a_chunk() {
    let dense = [
        (GemmType::F32, 20_000, 64), // f32 x is read in place: no cast
        (GemmType::F16, 8960, 1536),
        (GemmType::Bf16, 1536, 17_920),
    ];
    let s = GemmScratch::of(dense, [], DEQUANT);
    assert_eq!(s.cast, CHUNK * 8960);
    assert_eq!(s.out, CHUNK * 17_920);
    assert_eq!(s.dequant, 0);
    assert_eq!(
        s.bytes(),
        WORKSPACE_BYTES + 2 * CHUNK * 8960 + 4 * CHUNK * 17_920
    );
    assert_eq!(GemmScratch::of([], [], DEQUANT).bytes(), WORKSPACE_BYTES);
    // int4 layers: their input is cast and their sums land in the scratch like a dense
    // layer's; the dequantised slice holds the widest layer's slice in its type.
    let int4 = [(GemmType::F16, 4096, 28_672), (GemmType::F16, 14_336, 4096)];
    let s = GemmScratch::of([], int4, DEQUANT);
    assert_eq!((s.cast, s.out), (CHUNK * 14_336, CHUNK * 28_672));
    let widest =
        [(4096, 28_672), (14_336, 4096)].map(|(k, n)| dequant_cols_in(k, n, DEQUANT) * k * 2);
    assert_eq!(s.dequant, widest.into_iter().max().unwrap_or(0));
    assert!(s.dequant <= 2 * DEQUANT);
    let small = GemmScratch::of([], [(GemmType::F32, 1536, 2048)], DEQUANT);
    assert_eq!(small.dequant, 4 * 1536 * 2048);
}

#[test]
fn every_dense_gemv_kernel_has_a_gemm_type() {
    let gemv = crate::cuda::compile::family("gemv").expect("the gemv family");
    for symbol in gemv.symbols.iter().filter(|s| !s.contains("decode")) {
        assert!(GemmType::of(symbol).is_some(), "{symbol}");
    }
    assert_eq!(GemmType::of("gemv_int4_f32"), None);
}

#[test]
fn a_missing_cublas_is_an_error_not_a_panic() {
    match cublas_available() {
        Ok(()) => println!("cuBLAS found"),
        Err(why) => assert!(why.contains("cuBLAS"), "{why}"),
    }
}

#[test]
fn a_half_copy_takes_the_one_sixteen_bit_type_its_consumers_cast_to() {
    use GemmType::{Bf16, F16, F32};
    // Consumers reading f32 x, or running no GEMM, do not ask for a copy.
    assert_eq!(common_half([]), None);
    assert_eq!(common_half([None, Some(F32)]), None);
    assert_eq!(common_half([Some(F16), None, Some(F16)]), Some(F16));
    assert_eq!(common_half([Some(F32), Some(Bf16)]), Some(Bf16));
    // Two 16-bit types: one copy cannot serve both, and each consumer casts for itself.
    assert_eq!(common_half([Some(F16), Some(Bf16)]), None);
    assert_eq!(common_half([Some(Bf16), Some(F32), Some(F16)]), None);
}

#[test]
fn a_half_copy_passes_its_address_and_type_to_the_kernels() {
    let copy = |ty| HalfCopy {
        ptr: 0x1000,
        ty,
        len: 8,
    };
    assert_eq!(HalfCopy::args(None), (0, 0));
    assert_eq!(HalfCopy::args(Some(copy(GemmType::F16))), (0x1000, 0));
    assert_eq!(HalfCopy::args(Some(copy(GemmType::Bf16))), (0x1000, 1));
}
