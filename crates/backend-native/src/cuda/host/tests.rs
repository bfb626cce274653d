//! Tests of the host-side weight preparation and the layer image.

use super::{HostLinear, HostWeight, transpose_bytes};

fn dense(n: usize, k: usize, first: u8, bias: Option<f32>) -> HostLinear {
    HostLinear {
        weight: HostWeight::Dense {
            kernel: "gemv_f16",
            nk: (0..n * k * 2)
                .map(|i| first.wrapping_add(i as u8))
                .collect(),
        },
        bias: bias.map(|b| vec![b; n]),
        k,
        n,
    }
}

fn int4(n: usize, k: usize, block: usize, int8: bool) -> HostLinear {
    let nb = k.div_ceil(block);
    HostLinear {
        weight: HostWeight::Int4 {
            packed: (0..n * nb * block / 2).map(|i| i as u8).collect(),
            scales: (0..n * nb).map(|i| i as f32).collect(),
            zp_u8: Some(vec![8; n * nb]),
            zp_f32: Some(vec![8.0; n * nb]),
            block,
            int8,
            prompt: super::GemmType::F32,
        },
        bias: None,
        k,
        n,
    }
}

#[test]
fn compatible_projections_stack_along_n() {
    let (q, k) = (dense(4, 8, 0, Some(1.0)), dense(2, 8, 100, None));
    let (q_rows, k_rows) = match (&q.weight, &k.weight) {
        (HostWeight::Dense { nk: a, .. }, HostWeight::Dense { nk: b, .. }) => {
            (a.clone(), b.clone())
        }
        _ => unreachable!(),
    };
    let Ok(one) = HostLinear::concat(vec![q, k]) else {
        panic!("same k and kernel must stack");
    };
    assert_eq!((one.n, one.k), (6, 8));
    let HostWeight::Dense { nk, .. } = &one.weight else {
        panic!("dense");
    };
    assert_eq!(nk[..q_rows.len()], q_rows[..]);
    assert_eq!(nk[q_rows.len()..], k_rows[..]);
    // A missing bias becomes zeros.
    assert_eq!(one.bias, Some(vec![1.0, 1.0, 1.0, 1.0, 0.0, 0.0]));
}

#[test]
fn incompatible_projections_stay_apart() {
    let parts = vec![dense(4, 8, 0, None), dense(4, 16, 0, None)];
    assert_eq!(HostLinear::concat(parts).err().map(|p| p.len()), Some(2));
    let parts = vec![int4(4, 64, 32, true), int4(4, 64, 32, false)];
    assert_eq!(HostLinear::concat(parts).err().map(|p| p.len()), Some(2));
    let parts = vec![int4(4, 64, 32, true), int4(2, 64, 32, true)];
    assert!(HostLinear::concat(parts).is_ok());
}

#[test]
fn halves_interleave_into_gate_up_pairs() {
    // Rows 0..3 are gate, 3..6 up: pairs (0, 3), (1, 4), (2, 5).
    let h = int4(6, 32, 32, false).interleave_halves();
    let HostWeight::Int4 { packed, scales, .. } = &h.weight else {
        panic!("int4");
    };
    assert_eq!(scales, &vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    let row = |r: u8| (r * 16..r * 16 + 16).collect::<Vec<u8>>();
    let want: Vec<u8> = [0, 3, 1, 4, 2, 5].iter().flat_map(|&r| row(r)).collect();
    assert_eq!(packed, &want);
}

#[test]
fn images_hold_every_part_at_aligned_offsets() {
    let mut layer = int4(4, 64, 32, true);
    layer.bias = Some(vec![0.5; 4]);
    let image = layer.into_image_with(true);
    let p = image.parts;
    assert_eq!(p.main, 0);
    for offset in [p.scales, p.zp_f32, p.zp_u8, p.bias] {
        assert_eq!(offset.map(|o| o % super::IMAGE_ALIGN), Some(0));
    }
    let at = |o: Option<usize>, i: usize| {
        let o = o.unwrap() + 4 * i;
        f32::from_le_bytes(image.bytes[o..o + 4].try_into().unwrap())
    };
    // Scales 0..8, zero points 8.0, bias 0.5; u8 zero points 8.
    assert_eq!(at(p.scales, 7), 7.0);
    assert_eq!(at(p.zp_f32, 3), 8.0);
    assert_eq!(at(p.bias, 3), 0.5);
    assert_eq!(image.bytes[p.zp_u8.unwrap() + 7], 8);
    assert_eq!(image.bytes.len(), p.bias.unwrap() + 16);
    assert_eq!(image.bytes[..4], [0, 1, 2, 3]);
    // A dense layer without bias is its values as they are.
    let dense = dense(3, 8, 5, None);
    let HostWeight::Dense { nk, .. } = &dense.weight else {
        unreachable!()
    };
    let values = nk.clone();
    let image = dense.into_image_with(true);
    assert_eq!(image.bytes, values);
    assert_eq!(image.parts.bias, None);
}

#[test]
fn f16_scales_are_kept_only_where_asked_exact_and_read_by_the_tensor_cores() {
    let half_scales = |layer: HostLinear| layer.into_image_with(true).parts.scales_f16;
    // Scales 0..8 are f16 values; integral zero points, block 32, CompFp32: kept, aligned,
    // after the f32 ones, the same values.
    let image = int4(4, 64, 32, false).into_image_with(true);
    let at = image.parts.scales_f16.expect("f16 scales");
    assert_eq!(at % super::IMAGE_ALIGN, 0);
    let bits =
        |i: usize| u16::from_le_bytes([image.bytes[at + 2 * i], image.bytes[at + 2 * i + 1]]);
    assert_eq!(
        (0..8)
            .map(|i| half::f16::from_bits(bits(i)).to_f32())
            .collect::<Vec<_>>(),
        (0..8).map(|i| i as f32).collect::<Vec<_>>()
    );
    // Not unless asked, not for CompInt8, block 16 or float zero points, and not when one
    // scale is not exactly an f16.
    assert_eq!(
        int4(4, 64, 32, false)
            .into_image_with(false)
            .parts
            .scales_f16,
        None
    );
    assert_eq!(half_scales(int4(4, 64, 32, true)), None);
    assert_eq!(half_scales(int4(4, 64, 16, false)), None);
    let mut fractional = int4(4, 64, 32, false);
    if let HostWeight::Int4 { zp_f32, .. } = &mut fractional.weight {
        zp_f32.as_mut().expect("zero points")[0] = 7.5;
    }
    assert_eq!(half_scales(fractional), None);
    let mut inexact = int4(4, 64, 32, false);
    if let HostWeight::Int4 { scales, .. } = &mut inexact.weight {
        scales[5] = 1.0 + f32::EPSILON;
    }
    assert_eq!(half_scales(inexact), None);
}

#[test]
fn transpose_moves_every_element() {
    for &(rows, cols, size) in &[(3, 5, 2), (70, 33, 4), (1, 9, 2), (65, 1, 4)] {
        let data: Vec<u8> = (0..rows * cols * size)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let t = transpose_bytes(&data, rows, cols, size);
        for r in 0..rows {
            for c in 0..cols {
                let (a, b) = ((r * cols + c) * size, (c * rows + r) * size);
                assert_eq!(data[a..a + size], t[b..b + size], "{rows}x{cols} ({r},{c})");
            }
        }
    }
}
