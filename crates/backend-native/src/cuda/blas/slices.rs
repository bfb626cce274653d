//! The width of the slices an int4 prompt layer is dequantised in (`blas/int4.rs`): how many
//! values the scratch holds (`CudaTuning::dequant_values`, `GENAI_BRIDGE_DEQUANT_MI`), and how a
//! layer wider than that is cut into even slices of whole 64-column tiles.

/// Columns a slice of a wider int4 layer holds a multiple of, where the scratch allows.
const DEQUANT_ALIGN: usize = 64;

/// Columns of a `[n, k]` int4 weight dequantised per GEMM with room for `values`: all of them
/// where they fit, else the fewest slices that fit, as even as a multiple of
/// [`DEQUANT_ALIGN`] allows (at least one column). Each slice's GEMM then writes columns that
/// start 256-byte aligned and fill whole tiles: round 35 measured Llama-3-8B's down projection
/// cut at 1,170 columns (what the scratch holds) on a split-K Ampere kernel at a third of the
/// speed of the aligned slices.
pub(crate) fn dequant_cols_in(k: usize, n: usize, values: usize) -> usize {
    let (most, n) = ((values / k.max(1)).max(1), n.max(1));
    if most >= n {
        return n;
    }
    let even = n.div_ceil(n.div_ceil(most)).next_multiple_of(DEQUANT_ALIGN);
    if even <= most {
        even
    } else if most >= DEQUANT_ALIGN {
        most / DEQUANT_ALIGN * DEQUANT_ALIGN
    } else {
        most
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default width (`CudaTuning::dequant_values`).
    const DEQUANT_VALUES: usize = crate::settings::DEQUANT_DEFAULT_MI << 20;

    #[test]
    fn dequantised_slices_cover_every_column_within_the_scratch() {
        const MI16: usize = 16 << 20;
        // Llama-3-8B gate/up: 4096 columns of 4096 values per slice at 16 Mi, 7 slices; at the
        // default 32 Mi, 4 slices of 7,168.
        assert_eq!(dequant_cols_in(4096, 28_672, MI16), 4096);
        assert_eq!(dequant_cols_in(4096, 28_672, DEQUANT_VALUES), 7168);
        // A narrow layer is one slice; a row longer than the scratch still gets one column.
        assert_eq!(dequant_cols_in(1536, 2048, MI16), 2048);
        assert_eq!(dequant_cols_in(MI16 + 1, 5, MI16), 1);
        // Llama-3-8B down at 16 Mi: the scratch holds 1,170 columns of 14,336; four even slices
        // of 1,024 (at 32 Mi, two of 2,048).
        assert_eq!(dequant_cols_in(14_336, 4096, MI16), 1024);
        assert_eq!(dequant_cols_in(14_336, 4096, DEQUANT_VALUES), 2048);
        // Two slices of a layer one column too wide: 2,112 (a multiple of 64) and the rest.
        assert_eq!(dequant_cols_in(4096, 4097, MI16), 2112);
        for (k, n) in [
            (4096, 28_672),
            (14_336, 4096),
            (896, 1152),
            (4096, 4098),
            (18_944, 3584),
            (13_824, 5120),
            (300_000, 7000),
        ] {
            let cols = dequant_cols_in(k, n, DEQUANT_VALUES);
            assert!(
                cols * k <= DEQUANT_VALUES && cols >= 1 && cols <= n,
                "k {k} n {n}"
            );
            // A slice of a wider layer is a multiple of 64 columns where 64 fit.
            let most = DEQUANT_VALUES / k;
            if cols < n && most >= 64 {
                assert_eq!(cols % 64, 0, "k {k} n {n}");
                // and no more slices than the widest aligned slice that fits would take.
                assert!(
                    n.div_ceil(cols) <= n.div_ceil(most / 64 * 64),
                    "k {k} n {n}"
                );
                if n.div_ceil(n.div_ceil(most)).next_multiple_of(64) <= most {
                    assert_eq!(n.div_ceil(cols), n.div_ceil(most), "k {k} n {n}");
                }
            }
        }
    }

    #[test]
    fn a_wider_scratch_takes_fewer_wider_slices() {
        assert_eq!(dequant_cols_in(4096, 28_672, 64 << 20), 14_336);
    }
}
