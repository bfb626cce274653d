//! Host-side preparation of the plan's weights before their one upload: dense linear weights
//! transposed to `[n, k]` in their stored precision, MatMulNBits weights packed as stored with
//! f32 scales and unpacked zero points, the rest as f32; and the concatenation of projections
//! that read the same input (q/k/v, gate/up) into one weight, so one launch computes them;
//! and the image: one linear layer as one contiguous, aligned byte block, which is what sits in
//! device memory (resident) or in page-locked host memory (streamed into a slot every step).

use crate::cuda::kernels::GemmType;
use crate::cuda::kernels::int4_mma_form;
use crate::error::Error;
use genai_frontend::{Int4Weight as PlanInt4, Linear, Table, Tensor, Weight, WeightDType};
use genai_onnx::{DataType, OnnxModel};

/// A linear layer's weight on the host, in the device layout.
pub(crate) enum HostWeight {
    /// `[n, k]` values for `kernel`.
    Dense { kernel: &'static str, nk: Vec<u8> },
    /// MatMulNBits: packed `[n, nb, block/2]`, scales `[n, nb]`, zero points `[n, nb]`.
    Int4 {
        packed: Vec<u8>,
        scales: Vec<f32>,
        zp_u8: Option<Vec<u8>>,
        zp_f32: Option<Vec<f32>>,
        block: usize,
        int8: bool,
        /// The type a prompt GEMM dequantises to (the scales' type).
        prompt: GemmType,
    },
}

/// A linear layer on the host.
pub(crate) struct HostLinear {
    pub weight: HostWeight,
    pub bias: Option<Vec<f32>>,
    pub k: usize,
    pub n: usize,
}

impl HostLinear {
    /// Reads the plan's layer out of the model.
    pub fn load(model: &OnnxModel, plan: &Linear) -> Result<Self, Error> {
        let (k, n) = (plan.k, plan.n);
        let weight = match &plan.weight {
            Weight::Dense { tensor, transposed } => {
                let bytes = raw(model, &tensor.name)?;
                let (size, kernel) = match tensor.dtype {
                    WeightDType::F32 => (4, "gemv_f32"),
                    WeightDType::F16 => (2, "gemv_f16"),
                    WeightDType::BF16 => (2, "gemv_bf16"),
                };
                if bytes.len() != k * n * size {
                    return Err(model_error(
                        &tensor.name,
                        format!("{} bytes, plan expects {k} x {n} x {size}", bytes.len()),
                    ));
                }
                let nk = if *transposed {
                    bytes.into_owned()
                } else {
                    transpose_bytes(&bytes, k, n, size)
                };
                HostWeight::Dense { kernel, nk }
            }
            Weight::Int4(w) => int4(model, w)?,
        };
        let bias = plan
            .bias
            .as_ref()
            .map(|b| tensor_f32(model, b))
            .transpose()?;
        Ok(HostLinear { weight, bias, k, n })
    }

    /// A `[gate | up]` stacked layer (n even) with its rows reordered to (gate_i, up_i) pairs,
    /// for the linear kernels' GLU epilogue.
    pub fn interleave_halves(mut self) -> HostLinear {
        fn pairs<T: Copy>(v: &[T], n: usize) -> Vec<T> {
            let row = v.len() / n;
            let half = n / 2;
            let mut out = Vec::with_capacity(v.len());
            for i in 0..half {
                out.extend_from_slice(&v[i * row..(i + 1) * row]);
                out.extend_from_slice(&v[(half + i) * row..(half + i + 1) * row]);
            }
            out
        }
        let n = self.n;
        self.weight = match self.weight {
            HostWeight::Dense { kernel, nk } => HostWeight::Dense {
                kernel,
                nk: pairs(&nk, n),
            },
            HostWeight::Int4 {
                packed,
                scales,
                zp_u8,
                zp_f32,
                block,
                int8,
                prompt,
            } => HostWeight::Int4 {
                packed: pairs(&packed, n),
                scales: pairs(&scales, n),
                zp_u8: zp_u8.map(|z| pairs(&z, n)),
                zp_f32: zp_f32.map(|z| pairs(&z, n)),
                block,
                int8,
                prompt,
            },
        };
        self.bias = self.bias.map(|b| pairs(&b, n));
        self
    }

    /// The layers stacked along n (outputs `[a | b | ..]`), when they share k and a kernel.
    pub fn concat(parts: Vec<HostLinear>) -> Result<HostLinear, Vec<HostLinear>> {
        let compatible = parts.windows(2).all(|w| {
            w[0].k == w[1].k
                && match (&w[0].weight, &w[1].weight) {
                    (HostWeight::Dense { kernel: a, .. }, HostWeight::Dense { kernel: b, .. }) => {
                        a == b
                    }
                    (
                        HostWeight::Int4 {
                            block: a,
                            int8: x,
                            zp_f32: za,
                            zp_u8: ua,
                            prompt: pa,
                            ..
                        },
                        HostWeight::Int4 {
                            block: b,
                            int8: y,
                            zp_f32: zb,
                            zp_u8: ub,
                            prompt: pb,
                            ..
                        },
                    ) => {
                        a == b
                            && x == y
                            && za.is_some() == zb.is_some()
                            && ua.is_some() == ub.is_some()
                            && pa == pb
                    }
                    _ => false,
                }
        });
        if parts.len() < 2 || !compatible {
            return Err(parts);
        }
        let k = parts[0].k;
        let n = parts.iter().map(|p| p.n).sum();
        let bias = parts.iter().any(|p| p.bias.is_some()).then(|| {
            parts
                .iter()
                .flat_map(|p| p.bias.clone().unwrap_or_else(|| vec![0.0; p.n]))
                .collect()
        });
        let mut iter = parts.into_iter().map(|p| p.weight);
        let Some(first) = iter.next() else {
            return Err(Vec::new());
        };
        let weight = iter.fold(first, |acc, w| match (acc, w) {
            (HostWeight::Dense { kernel, mut nk }, HostWeight::Dense { nk: more, .. }) => {
                nk.extend_from_slice(&more);
                HostWeight::Dense { kernel, nk }
            }
            (
                HostWeight::Int4 {
                    mut packed,
                    mut scales,
                    zp_u8,
                    zp_f32,
                    block,
                    int8,
                    prompt,
                },
                HostWeight::Int4 {
                    packed: p2,
                    scales: s2,
                    zp_u8: u2,
                    zp_f32: f2,
                    ..
                },
            ) => {
                packed.extend_from_slice(&p2);
                scales.extend_from_slice(&s2);
                let zp_u8 = zp_u8.zip(u2).map(|(mut a, b)| {
                    a.extend_from_slice(&b);
                    a
                });
                let zp_f32 = zp_f32.zip(f2).map(|(mut a, b)| {
                    a.extend_from_slice(&b);
                    a
                });
                HostWeight::Int4 {
                    packed,
                    scales,
                    zp_u8,
                    zp_f32,
                    block,
                    int8,
                    prompt,
                }
            }
            (acc, _) => acc,
        });
        Ok(HostLinear { weight, bias, k, n })
    }
}

/// How the kernels read an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// `[n, k]` values for `kernel`.
    Dense { kernel: &'static str },
    /// MatMulNBits; `int8` selects the CompInt8 path; prompt GEMMs of the CompFp32 path
    /// dequantise to `prompt`; `integral_zp`: every zero point is an integer in 0..=15 (or
    /// there are none), which the tensor-core one-row kernel needs.
    Int4 {
        block: usize,
        int8: bool,
        prompt: GemmType,
        integral_zp: bool,
    },
}

/// Byte offsets of a layer's parts inside its image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Parts {
    /// Dense values, or the packed 4-bit data.
    pub main: usize,
    /// f32 block scales (int4).
    pub scales: Option<usize>,
    /// The same scales as f16 bits, where kept ([`HostLinear::into_image_with`]).
    pub scales_f16: Option<usize>,
    /// f32 zero points (int4, float path).
    pub zp_f32: Option<usize>,
    /// u8 zero points (int4, CompInt8 path).
    pub zp_u8: Option<usize>,
    /// f32 bias.
    pub bias: Option<usize>,
}

/// A linear layer as one byte block.
pub(crate) struct Image {
    pub bytes: Vec<u8>,
    pub form: Form,
    pub parts: Parts,
    pub k: usize,
    pub n: usize,
}

/// Alignment of every part inside an image (and of device allocations).
pub(crate) const IMAGE_ALIGN: usize = 256;

/// Appends `data` at the next aligned offset and returns that offset.
fn append(image: &mut Vec<u8>, data: impl IntoIterator<Item = u8>) -> usize {
    let offset = image.len().next_multiple_of(IMAGE_ALIGN);
    image.resize(offset, 0);
    image.extend(data);
    offset
}

/// The scales as f16 bits when every one is exactly an f16, else None.
fn f16_scales(scales: &[f32]) -> Option<Vec<u16>> {
    scales
        .iter()
        .map(|&s| {
            let h = half::f16::from_f32(s);
            (h.to_f32().to_bits() == s.to_bits()).then_some(h.to_bits())
        })
        .collect()
}

/// Whether float zero points are all integers a nibble holds (0..=15).
fn integral_zero_points(zp: &[f32]) -> bool {
    zp.iter()
        .all(|z| z.fract() == 0.0 && (0.0..=15.0).contains(z))
}

/// Little-endian bytes of f32 values, as an iterator (no intermediate copy).
fn f32_bytes(values: &[f32]) -> impl Iterator<Item = u8> + '_ {
    values.iter().flat_map(|v| v.to_le_bytes())
}

impl HostLinear {
    /// The layer as one image (the dense values are moved, not copied), keeping f16 scales
    /// where `half_scales` (`CudaTuning::int4_half_scales`, the default) and the layer suit:
    /// CompFp32 int4 layers the tensor-core kernel suits keep the model's f16 scales (where
    /// every scale is exactly an f16) beside the f32 ones, and one-row steps read those
    /// (`gemv_decode_int4_mma_s16`): half the scale bytes for the same values, for that part's
    /// room in device memory. Only the f32 scales measured 2-3% slower on the H200's 1.5B/8B int4
    /// shapes (docs/cuda.md round 13).
    pub fn into_image_with(self, half_scales: bool) -> Image {
        let (mut bytes, form, mut parts) = match self.weight {
            HostWeight::Dense { kernel, nk } => (nk, Form::Dense { kernel }, Parts::default()),
            HostWeight::Int4 {
                packed,
                scales,
                zp_u8,
                zp_f32,
                block,
                int8,
                prompt,
            } => {
                let integral_zp = zp_f32.as_deref().is_none_or(integral_zero_points);
                let half = half_scales && !int8 && int4_mma_form(block, integral_zp);
                let mut bytes = packed;
                let mut parts = Parts {
                    scales: Some(append(&mut bytes, f32_bytes(&scales))),
                    ..Parts::default()
                };
                if let Some(h) = half.then(|| f16_scales(&scales)).flatten() {
                    parts.scales_f16 =
                        Some(append(&mut bytes, h.iter().flat_map(|v| v.to_le_bytes())));
                }
                parts.zp_f32 = zp_f32.map(|z| append(&mut bytes, f32_bytes(&z)));
                parts.zp_u8 = zp_u8.map(|z| append(&mut bytes, z));
                (
                    bytes,
                    Form::Int4 {
                        block,
                        int8,
                        prompt,
                        integral_zp,
                    },
                    parts,
                )
            }
        };
        parts.bias = self.bias.map(|b| append(&mut bytes, f32_bytes(&b)));
        Image {
            bytes,
            form,
            parts,
            k: self.k,
            n: self.n,
        }
    }
}

fn model_error(what: impl Into<String>, message: impl std::fmt::Display) -> Error {
    Error::Model {
        what: what.into(),
        message: message.to_string(),
    }
}

fn raw<'m>(model: &'m OnnxModel, name: &str) -> Result<std::borrow::Cow<'m, [u8]>, Error> {
    let t = model
        .initializer(name)
        .ok_or_else(|| model_error(name, "initializer missing"))?;
    t.bytes().map_err(|e| model_error(name, e))
}

fn f32s(model: &OnnxModel, name: &str, expected: Option<usize>) -> Result<Vec<f32>, Error> {
    let t = model
        .initializer(name)
        .ok_or_else(|| model_error(name, "initializer missing"))?;
    let v = t.to_f32_vec().map_err(|e| model_error(name, e))?;
    match expected {
        Some(n) if n != v.len() => Err(model_error(
            name,
            format!("{} values, plan expects {n}", v.len()),
        )),
        _ => Ok(v),
    }
}

/// A float tensor as f32 values, checked against the plan's dims.
pub(crate) fn tensor_f32(model: &OnnxModel, t: &Tensor) -> Result<Vec<f32>, Error> {
    f32s(model, &t.name, Some(t.dims.iter().product()))
}

/// `[rows, cols]` elements of `size` (2 or 4) bytes, transposed to `[cols, rows]`, in tiles,
/// on all cores (an 8B model's weights are tens of GB).
pub(crate) fn transpose_bytes(data: &[u8], rows: usize, cols: usize, size: usize) -> Vec<u8> {
    let mut out = vec![0u8; data.len()];
    if rows == 0 || cols == 0 {
        return out;
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(32);
    let per = cols.div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        for (part, dst) in out.chunks_mut(per * rows * size).enumerate() {
            let c_start = part * per;
            scope.spawn(move || match size {
                2 => tile(data, dst, rows, cols, c_start, |s, d, i, j| {
                    d[2 * j..2 * j + 2].copy_from_slice(&s[2 * i..2 * i + 2])
                }),
                _ => tile(data, dst, rows, cols, c_start, |s, d, i, j| {
                    d[4 * j..4 * j + 4].copy_from_slice(&s[4 * i..4 * i + 4])
                }),
            });
        }
    });
    out
}

/// Fills `dst` (output columns `c_start..`, each `rows` long) from `src` `[rows, cols]`;
/// `copy(src, dst, i, j)` moves element `i` of `src` to element `j` of `dst`.
fn tile(
    src: &[u8],
    dst: &mut [u8],
    rows: usize,
    cols: usize,
    c_start: usize,
    copy: impl Fn(&[u8], &mut [u8], usize, usize),
) {
    const TILE: usize = 32;
    let ncols = dst.len() / (rows * (src.len() / (rows * cols)).max(1));
    for r0 in (0..rows).step_by(TILE) {
        for c0 in (0..ncols).step_by(TILE) {
            for c in c0..(c0 + TILE).min(ncols) {
                for r in r0..(r0 + TILE).min(rows) {
                    copy(src, dst, r * cols + c_start + c, c * rows + r);
                }
            }
        }
    }
}

/// Zero points of a MatMulNBits weight, one per block, as u8 (packed input) or f32 (float).
fn zero_points(
    model: &OnnxModel,
    name: &str,
    n: usize,
    nb: usize,
) -> Result<(Option<Vec<u8>>, Vec<f32>), Error> {
    let t = model
        .initializer(name)
        .ok_or_else(|| model_error(name, "initializer missing"))?;
    if t.dtype == DataType::Uint8 {
        let packed = raw(model, name)?;
        let per_col = nb.div_ceil(2);
        if packed.len() != n * per_col {
            return Err(model_error(
                name,
                format!("{} bytes, expected {n} x {per_col}", packed.len()),
            ));
        }
        let mut u = Vec::with_capacity(n * nb);
        for col in packed.chunks(per_col) {
            u.extend((0..nb).map(|b| (col[b / 2] >> (4 * (b % 2))) & 0x0f));
        }
        let f = u.iter().map(|&z| f32::from(z)).collect();
        Ok((Some(u), f))
    } else {
        Ok((None, f32s(model, name, Some(n * nb))?))
    }
}

/// A MatMulNBits weight as the kernels read it.
fn int4(model: &OnnxModel, w: &PlanInt4) -> Result<HostWeight, Error> {
    if ![16, 32, 64, 128, 256].contains(&w.block_size) {
        return Err(model_error(
            &w.packed,
            format!("block_size {}", w.block_size),
        ));
    }
    let nb = w.k.div_ceil(w.block_size);
    let packed = raw(model, &w.packed)?;
    if packed.len() != w.n * nb * w.block_size / 2 {
        return Err(model_error(
            &w.packed,
            "packed data is not [n, blocks, block/2]",
        ));
    }
    let scales = f32s(model, &w.scales.name, Some(w.n * nb))?;
    let (zp_u8, zp_f32) = match &w.zero_points {
        Some(name) => {
            let (u, f) = zero_points(model, name, w.n, nb)?;
            (u, Some(f))
        }
        None => (None, None),
    };
    let float_zp = zp_f32.is_some() && zp_u8.is_none();
    Ok(HostWeight::Int4 {
        packed: packed.into_owned(),
        scales,
        zp_u8,
        zp_f32,
        block: w.block_size,
        int8: w.accuracy_level == 4 && !float_zp,
        prompt: GemmType::of_scales(w.scales.dtype),
    })
}

/// An embedding table as f32 rows `[vocab, hidden]`.
pub(crate) fn table(
    model: &OnnxModel,
    table: &Table,
    vocab: usize,
    hidden: usize,
) -> Result<Vec<f32>, Error> {
    match table {
        Table::Dense(t) => tensor_f32(model, t),
        Table::Transposed(t) => {
            let v = tensor_f32(model, t)?;
            let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
            let tr = transpose_bytes(&bytes, hidden, vocab, 4);
            Ok(tr
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        }
        Table::Int4(w) => dequantize_rows(model, w),
    }
}

/// Rows of a block-quantized table (GatherBlockQuantized): row r is `(q - zp) * scale`.
fn dequantize_rows(model: &OnnxModel, w: &PlanInt4) -> Result<Vec<f32>, Error> {
    let (k, n, block) = (w.k, w.n, w.block_size);
    let nb = k.div_ceil(block);
    let packed = raw(model, &w.packed)?;
    let scales = f32s(model, &w.scales.name, Some(n * nb))?;
    if packed.len() != n * nb * block / 2 {
        return Err(model_error(
            &w.packed,
            "packed data is not [n, blocks, block/2]",
        ));
    }
    let zp = match &w.zero_points {
        Some(name) => Some(zero_points(model, name, n, nb)?.1),
        None => None,
    };
    let mut rows = vec![0.0f32; n * k];
    for r in 0..n {
        for b in 0..nb {
            let scale = scales[r * nb + b];
            let z = zp.as_ref().map_or(8.0, |z| z[r * nb + b]);
            let base = (r * nb + b) * block / 2;
            for j in 0..block.min(k - b * block) {
                let byte = packed[base + j / 2];
                let q = if j % 2 == 0 { byte & 0x0f } else { byte >> 4 };
                rows[r * k + b * block + j] = (f32::from(q) - z) * scale;
            }
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests;
