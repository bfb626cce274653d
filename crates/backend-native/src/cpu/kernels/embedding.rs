//! Embedding lookup: gather rows of a `[vocab, width]` table (f32, or f16/bf16 bits widened to
//! f32 exactly) for a list of token ids.

use crate::error::{Error, check_len, invalid, mul};

/// An embedding table as stored in the model, row-major `[vocab, width]`.
#[derive(Debug, Clone, Copy)]
pub enum Table<'a> {
    /// f32 values.
    F32(&'a [f32]),
    /// IEEE half-precision bits.
    F16Bits(&'a [u16]),
    /// bfloat16 bits.
    Bf16Bits(&'a [u16]),
}

impl Table<'_> {
    fn len(&self) -> usize {
        match self {
            Table::F32(t) => t.len(),
            Table::F16Bits(t) | Table::Bf16Bits(t) => t.len(),
        }
    }
}

/// `out[i, :] = table[ids[i], :]` as f32; every id must be in `0..vocab`.
pub fn gather_rows(
    table: Table<'_>,
    width: usize,
    ids: &[i64],
    out: &mut [f32],
) -> Result<(), Error> {
    if width == 0 || !table.len().is_multiple_of(width) {
        return Err(invalid(
            "width",
            format!("{width} does not divide the table's {} values", table.len()),
        ));
    }
    let vocab = table.len() / width;
    check_len("out", mul("out", ids.len(), width)?, out.len())?;
    if let Some(&bad) = ids
        .iter()
        .find(|&&id| usize::try_from(id).map_or(true, |i| i >= vocab))
    {
        return Err(invalid(
            "ids",
            format!("token id {bad} is outside the vocabulary of {vocab}"),
        ));
    }
    for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(width)) {
        let at = id as usize * width;
        match table {
            Table::F32(t) => dst.copy_from_slice(&t[at..at + width]),
            Table::F16Bits(t) => {
                for (d, &b) in dst.iter_mut().zip(&t[at..at + width]) {
                    *d = half::f16::from_bits(b).to_f32();
                }
            }
            Table::Bf16Bits(t) => {
                for (d, &b) in dst.iter_mut().zip(&t[at..at + width]) {
                    *d = half::bf16::from_bits(b).to_f32();
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathers_rows_in_every_format() {
        let (vocab, width) = (5, 3);
        let f: Vec<f32> = (0..vocab * width).map(|i| i as f32 * 0.5 - 3.0).collect();
        let h: Vec<u16> = f
            .iter()
            .map(|&v| half::f16::from_f32(v).to_bits())
            .collect();
        let b: Vec<u16> = f
            .iter()
            .map(|&v| half::bf16::from_f32(v).to_bits())
            .collect();
        let ids = [4i64, 0, 4, 2];
        for table in [Table::F32(&f), Table::F16Bits(&h), Table::Bf16Bits(&b)] {
            let mut out = vec![0f32; ids.len() * width];
            gather_rows(table, width, &ids, &mut out).unwrap();
            for (i, &id) in ids.iter().enumerate() {
                // All test values are exact in f16 and bf16.
                assert_eq!(
                    &out[i * width..(i + 1) * width],
                    &f[id as usize * width..(id as usize + 1) * width]
                );
            }
        }
    }

    #[test]
    fn rejects_bad_ids_and_shapes() {
        let t = [0f32; 6];
        let mut out = [0f32; 3];
        assert!(gather_rows(Table::F32(&t), 3, &[2], &mut out).is_err());
        assert!(gather_rows(Table::F32(&t), 3, &[-1], &mut out).is_err());
        assert!(gather_rows(Table::F32(&t), 4, &[0], &mut out).is_err());
        assert!(gather_rows(Table::F32(&t), 3, &[0, 1], &mut out).is_err());
        assert!(gather_rows(Table::F32(&t), 3, &[1], &mut out).is_ok());
    }
}
