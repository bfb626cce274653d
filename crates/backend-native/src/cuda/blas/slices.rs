//! The width of the slices an int4 prompt layer is dequantised in (`blas/int4.rs`): how many
//! values the scratch holds (`GENAI_BRIDGE_DEQUANT_MI`), and how a layer wider than that is cut
//! into even slices of whole 64-column tiles.

/// Values of an int4 layer's weight dequantised at once for a prompt GEMM (64 MiB at f16): a
/// wider layer runs as several GEMMs over column slices. Round 35 (H200, Llama-3-8B int4):
/// 32 Mi against 16 Mi took the time to first token from 13.8 to 13.0 ms at 128 tokens and
/// from 244 to 232 ms at 3,584; 64 Mi gave the same as 32 (12.9, 232) for twice the memory.
pub(crate) const DEQUANT_VALUES: usize = 32 << 20;

/// Environment variable: Mi values of an int4 layer's weight dequantised per prompt GEMM, a
/// power of two from 1 to 256 (unset: [`DEQUANT_VALUES`], 32), an A/B switch for the slices'
/// width. Any other value is ignored, and the prompt route's reason says so.
pub const DEQUANT_ENV: &str = "GENAI_BRIDGE_DEQUANT_MI";

/// [`DEQUANT_ENV`]'s value in values (unset: [`DEQUANT_VALUES`]), or why it is ignored.
pub(super) fn parse_dequant(value: Option<&str>) -> Result<usize, String> {
    let Some(v) = value else {
        return Ok(DEQUANT_VALUES);
    };
    match v.trim().parse::<usize>() {
        Ok(mi) if mi.is_power_of_two() && mi <= 256 => Ok(mi << 20),
        _ => Err(format!(
            "{DEQUANT_ENV}={v:?} ignored (a power of two from 1 to 256)"
        )),
    }
}

/// Values of an int4 layer dequantised per prompt GEMM in this process ([`DEQUANT_ENV`]).
pub(crate) fn dequant_values() -> usize {
    static VALUES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *VALUES.get_or_init(|| {
        parse_dequant(std::env::var(DEQUANT_ENV).ok().as_deref()).unwrap_or(DEQUANT_VALUES)
    })
}

/// Columns a slice of a wider int4 layer holds a multiple of, where the scratch allows.
const DEQUANT_ALIGN: usize = 64;

/// Columns of a `[n, k]` int4 weight dequantised per GEMM in this process: [`dequant_cols_in`]
/// with [`dequant_values`].
pub(crate) fn dequant_cols(k: usize, n: usize) -> usize {
    dequant_cols_in(k, n, dequant_values())
}

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
    fn the_slice_switch_takes_powers_of_two_up_to_256_mi() {
        assert_eq!(parse_dequant(None), Ok(DEQUANT_VALUES));
        assert_eq!(parse_dequant(Some("32")), Ok(32 << 20));
        assert_eq!(parse_dequant(Some(" 1 ")), Ok(1 << 20));
        for bad in ["0", "24", "512", "-1", "x", ""] {
            let why = parse_dequant(Some(bad)).expect_err(bad);
            assert!(why.contains(DEQUANT_ENV), "{why}");
        }
        // A wider scratch takes fewer, wider slices.
        assert_eq!(dequant_cols_in(4096, 28_672, 64 << 20), 14_336);
    }
}
