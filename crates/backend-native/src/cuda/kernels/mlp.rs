//! The one-row feed-forward block in one launch (kernels/mlp_fused.cu) and the norm that reads
//! its sums back (`skip_norm_fixed_f32`, launched by `rows.rs`): which form a switch asks for,
//! the rule that sizes the one-wave form's slice of the intermediate units, and the launch.
//!
//! Two forms, both off by default (`GENAI_BRIDGE_MLP_FUSED`): the one-wave form (`mlp_fused_*`)
//! keeps every weight of the MLP in shared memory at once, so it is taken only where all of its
//! blocks are resident together with their slices; the walk form (`mlp_walk_*`, sm_90
//! clusters) has one (gate, up) pair a warp and splits the down rows inside clusters of 8
//! blocks, for any width. Both take only half-precision dense weights in device memory (not
//! streamed by the pager), a gated MLP of one (gate, up) weight and a down projection without a
//! bias. Their sums are 64-bit fixed point (kernels/mlp_fused.cu says why and what range), so
//! their results differ from the two-launch form's in the last bits of the down projection's
//! f32 sums, never from run to run.

use super::{DevPtr, Kernels, Ops, cfg, grid_dim, int, launch, launch_raw_in, param};
use crate::error::Error;
use cudarc::driver::{CudaContext, CudaFunction};
use std::collections::HashMap;

/// Environment variable: `1` (or `wave`) takes the one-wave fused MLP where it fits, `walk` the
/// cluster walk; unset or anything else: two launches.
pub const MLP_FUSED_ENV: &str = "GENAI_BRIDGE_MLP_FUSED";

/// Threads of a one-wave block (`MF_THREADS`).
const THREADS: u32 = 512;

/// Threads of a walk block (`MW_THREADS`), blocks a cluster (`MW_CLUSTER`) and the
/// intermediate units a cluster covers (`MW_SPAN`).
const WALK_THREADS: u32 = 256;
const WALK_CLUSTER: u32 = 8;
pub(crate) const WALK_SPAN: usize = 64;

/// How one-row steps run a fusable MLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum MlpForm {
    /// Two launches: gate/up with the GLU, then down.
    #[default]
    Two,
    /// One launch, every weight in shared memory in one wave (`mlp_fused_*`).
    Wave,
    /// One launch in clusters, a (gate, up) pair a warp (`mlp_walk_*`).
    Walk,
}

impl MlpForm {
    /// The form the switch's value asks for (unset, `0` or a value it does not know: `Two`).
    pub fn parse(value: Option<&str>) -> MlpForm {
        match value {
            Some("1" | "wave") => MlpForm::Wave,
            Some("walk") => MlpForm::Walk,
            _ => MlpForm::Two,
        }
    }

    /// Whether `value` names a form (unset and `0` name the two launches).
    pub fn known(value: Option<&str>) -> bool {
        matches!(value, None | Some("0")) || MlpForm::parse(value) != MlpForm::Two
    }
}

/// The widest hidden row a lane's registers hold x for (`32 * 8 * MF_XUNITS`).
const MAX_HIDDEN: usize = 2048;

/// u64 words the sums buffer holds per hidden value: `MF_ACC_STRIDE` may be at most this.
pub(crate) const ACC_WORDS: usize = 16;

/// A fused plan's key: the entry, hidden and intermediate widths.
type PlanKey = (&'static str, usize, usize);

/// Which fused form runs here, and the dynamic shared memory a one-wave block may take.
#[derive(Debug, Default)]
pub(crate) struct MlpFused {
    /// The switch's form where the device can run it (the one-wave entries opted into large
    /// shared memory; the walk's clusters launchable), else `Two`.
    pub form: MlpForm,
    /// What the switch asked for, and its value when it names no form (the route says so).
    pub asked: MlpForm,
    pub unknown: Option<String>,
    /// Whether the walk entries can run here (whatever the switch asks).
    pub walk: bool,
    max_bytes: usize,
    /// The slice chosen per (entry, hidden, inter), once.
    plans: std::sync::Mutex<HashMap<PlanKey, Option<usize>>>,
}

/// A fused launch: its form and entry, the intermediate units a block (one-wave) or a cluster
/// (walk) takes, and the weights.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FusedMlp {
    pub form: MlpForm,
    pub entry: &'static str,
    pub slice: usize,
    pub hidden: usize,
    pub inter: usize,
    /// (gate, up) row pairs `[2 * inter, hidden]`, their bias (0: none), down `[hidden, inter]`.
    pub gate_up: DevPtr,
    pub gate_up_bias: DevPtr,
    pub down: DevPtr,
    /// The GLU's activation (0 SiLU, 1 GELU, 2 GELU tanh).
    pub activation: i32,
}

/// The fused entry of a form for a dense kernel kind (half precision only).
pub(crate) fn fused_entry(kind: &str, form: MlpForm) -> Option<&'static str> {
    match (form, kind) {
        (MlpForm::Wave, "gemv_f16") => Some("mlp_fused_f16"),
        (MlpForm::Wave, "gemv_bf16") => Some("mlp_fused_bf16"),
        (MlpForm::Walk, "gemv_f16") => Some("mlp_walk_f16"),
        (MlpForm::Walk, "gemv_bf16") => Some("mlp_walk_bf16"),
        _ => None,
    }
}

/// Bytes of dynamic shared memory a block with `slice` units takes: the pairs' rows, the down
/// rows (`slice / 8` pieces rounded up to odd), and h.
pub(crate) fn fused_bytes(hidden: usize, slice: usize) -> usize {
    let dstride = (slice / 8) | 1;
    2 * slice * hidden * 2 + hidden * dstride * 16 + slice * 4
}

/// Whether the shape suits the one-wave kernel at all: the walk's whole pieces, and x in a
/// lane's registers.
fn shape_fits(hidden: usize, inter: usize) -> bool {
    walk_shape_fits(hidden, inter) && hidden <= MAX_HIDDEN
}

/// The smallest slice (a multiple of 8, so the most blocks) whose blocks fit `max_bytes` of
/// shared memory and are all resident at once, `per_sm(bytes)` of them an SM on `sms` SMs.
fn choose_slice(
    hidden: usize,
    inter: usize,
    max_bytes: usize,
    sms: usize,
    per_sm: impl Fn(usize) -> usize,
) -> Option<usize> {
    if !shape_fits(hidden, inter) || sms == 0 {
        return None;
    }
    (8..=inter.next_multiple_of(8)).step_by(8).find(|&slice| {
        let bytes = fused_bytes(hidden, slice);
        bytes <= max_bytes && inter.div_ceil(slice) <= per_sm(bytes) * sms
    })
}

impl MlpFused {
    /// Reads the switch, opts the one-wave entries into the device's largest dynamic shared
    /// memory and checks that the walk's clusters fit (sm_90 or later).
    pub fn probe(
        ctx: &CudaContext,
        major: i32,
        functions: &HashMap<&'static str, CudaFunction>,
    ) -> Self {
        // The entries are opted in whether or not the switch is on: the kernel checks launch
        // them directly.
        let value = std::env::var(MLP_FUSED_ENV).ok();
        let asked = MlpForm::parse(value.as_deref());
        let unknown = value.filter(|v| !MlpForm::known(Some(v)));
        let off = MlpFused {
            asked,
            unknown: unknown.clone(),
            ..MlpFused::default()
        };
        if ctx.bind_to_thread().is_err() {
            return off;
        }
        let mut most = usize::MAX;
        for entry in ["mlp_fused_f16", "mlp_fused_bf16"] {
            let Some(f) = functions.get(entry) else {
                return off;
            };
            most = most.min(super::opt_in_shared(ctx, f, 0, 0).unwrap_or(0));
        }
        // Both entries were found: `most` is what the lesser opt-in gave (0: none).
        let walk = walk_fits(ctx, major, functions);
        let form = match asked {
            MlpForm::Wave if most > 0 => MlpForm::Wave,
            MlpForm::Walk if walk => MlpForm::Walk,
            _ => MlpForm::Two,
        };
        MlpFused {
            form,
            asked,
            unknown,
            walk,
            max_bytes: most,
            plans: Default::default(),
        }
    }
}

/// Whether the walk entries can run here: sm_90 or later with cluster launches, and a cluster
/// of their blocks resident.
fn walk_fits(
    ctx: &CudaContext,
    major: i32,
    functions: &HashMap<&'static str, CudaFunction>,
) -> bool {
    use cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH;
    major >= 9
        && ctx.attribute(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) == Ok(1)
        && ["mlp_walk_f16", "mlp_walk_bf16"].iter().all(|e| {
            functions
                .get(e)
                .is_some_and(|f| super::decode::clusters_fit(f, WALK_CLUSTER, WALK_THREADS, 0))
        })
}

impl Kernels {
    /// The slice a one-wave launch of `kind` weights over (hidden, inter) takes here, or
    /// `None` where that form is off or does not fit in one wave.
    pub(crate) fn mlp_fused_slice(&self, kind: &str, hidden: usize, inter: usize) -> Option<usize> {
        if self.mlp.form != MlpForm::Wave {
            return None;
        }
        let entry = fused_entry(kind, MlpForm::Wave)?;
        let f = self.functions.get(entry)?;
        let key = (entry, hidden, inter);
        if let Some(known) = self
            .mlp
            .plans
            .lock()
            .ok()
            .and_then(|m| m.get(&key).copied())
        {
            return known;
        }
        let per_sm = |bytes: usize| {
            f.occupancy_max_active_blocks_per_multiprocessor(THREADS, bytes, None)
                .map_or(0, |n| n as usize)
        };
        let slice = choose_slice(hidden, inter, self.mlp.max_bytes, self.sms, per_sm);
        if let Ok(mut m) = self.mlp.plans.lock() {
            m.insert(key, slice);
        }
        slice
    }
}

impl Ops<'_> {
    /// One row's MLP: the down projection's sums of act(x Wg) * (x Wu) added into `acc` as
    /// fixed point (`acc` all zero before; `skip_norm_fixed` reads and clears it).
    pub fn mlp_fused(&self, p: &FusedMlp, x: DevPtr, acc: DevPtr) -> Result<(), Error> {
        let (hidden, inter) = (int("hidden", p.hidden)?, int("inter", p.inter)?);
        if p.form == MlpForm::Walk {
            return self.mlp_walk(p, x, acc, (hidden, inter));
        }
        if p.slice == 0 || !p.slice.is_multiple_of(8) || !shape_fits(p.hidden, p.inter) {
            return Err(Error::Invalid {
                what: "fused MLP",
                why: format!("slice {} for hidden {hidden}, inter {inter}", p.slice),
            });
        }
        let slice = int("slice", p.slice)?;
        let bytes = u32::try_from(fused_bytes(p.hidden, p.slice)).map_err(|_| Error::Invalid {
            what: "fused MLP",
            why: "shared memory past 4 GB".into(),
        })?;
        let f = self.k.get(p.entry)?;
        let c = cfg(
            (grid_dim("slices", p.inter.div_ceil(p.slice))?, 1, 1),
            THREADS,
            bytes,
        );
        launch!(
            self,
            f,
            c,
            &p.gate_up,
            &p.gate_up_bias,
            &p.down,
            &x,
            &acc,
            &hidden,
            &inter,
            &slice,
            &p.activation
        )
    }

    /// The walk form: `WALK_CLUSTER` blocks a span of `WALK_SPAN` units, in clusters.
    fn mlp_walk(
        &self,
        p: &FusedMlp,
        x: DevPtr,
        acc: DevPtr,
        (hidden, inter): (i32, i32),
    ) -> Result<(), Error> {
        if !walk_shape_fits(p.hidden, p.inter) {
            return Err(Error::Invalid {
                what: "fused MLP",
                why: format!("walk over hidden {hidden}, inter {inter}"),
            });
        }
        let blocks = p.inter.div_ceil(WALK_SPAN) * WALK_CLUSTER as usize;
        let f = self.k.get(p.entry)?;
        let c = cfg((grid_dim("spans", blocks)?, 1, 1), WALK_THREADS, 0);
        let mut params = [
            param(&p.gate_up),
            param(&p.gate_up_bias),
            param(&p.down),
            param(&x),
            param(&acc),
            param(&hidden),
            param(&inter),
            param(&p.activation),
        ];
        // SAFETY: the arguments match mlp_walk_*'s signature (device addresses, then int,
        // int, int); the weights hold [2 * inter, hidden] and [hidden, inter] halves, x hidden
        // floats and acc ACC_WORDS * hidden words (the caller's buffers, sized from the same
        // dimensions); the grid is a multiple of the cluster, which `walk_fits` found
        // launchable before the form was taken; `params` outlives the call.
        unsafe { launch_raw_in(self.stream, f, c, &mut params, self.pdl, WALK_CLUSTER) }
    }
}

/// Whether the walk form takes the shape: whole 16-byte pieces of both weights' rows.
pub(crate) fn walk_shape_fits(hidden: usize, inter: usize) -> bool {
    hidden > 0 && hidden.is_multiple_of(8) && inter > 0 && inter.is_multiple_of(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_bytes_cover_the_pairs_the_down_rows_and_h() {
        // Qwen2.5-0.5B (hidden 896) at 40 units: 80 rows of 1,792 bytes, 896 down rows of 5
        // pieces (5 is odd: no padding), 40 floats.
        assert_eq!(fused_bytes(896, 40), 80 * 1792 + 896 * 5 * 16 + 160);
        // 32 units: 4 pieces a down row, padded to 5 so 32 rows' reads hit distinct banks.
        assert_eq!(fused_bytes(896, 32), 64 * 1792 + 896 * 5 * 16 + 128);
    }

    #[test]
    fn the_slice_is_the_smallest_that_is_one_wave_within_the_shared_memory() {
        // An H200: 132 SMs, 227 KB a block; an SM holds as many blocks as 228 KB allows (1 KB
        // reserved a block), at most 1 (106 registers x 512 threads).
        let per_sm = |bytes: usize| (228 * 1024 / (bytes + 1024)).min(1);
        // Qwen2.5-0.5B: 8 to 32 units take 608 to 152 blocks, one an SM: no; 40 units, 122
        // blocks: one wave.
        let slice = choose_slice(896, 4864, 227 * 1024, 132, per_sm);
        assert_eq!(slice, Some(40));
        let bytes = fused_bytes(896, 40);
        assert!(bytes <= 227 * 1024 && 4864usize.div_ceil(40) <= 132);
        // Qwen2.5-1.5B: 82.6 MB of MLP weights cannot be in 132 SMs' shared memory at once.
        assert_eq!(choose_slice(1536, 8960, 227 * 1024, 132, per_sm), None);
        // Shapes the kernel does not take, and an unknown SM count.
        assert_eq!(choose_slice(4096, 1024, 227 * 1024, 132, per_sm), None);
        assert_eq!(choose_slice(900, 4864, 227 * 1024, 132, per_sm), None);
        assert_eq!(choose_slice(896, 4860, 227 * 1024, 132, per_sm), None);
        assert_eq!(choose_slice(896, 4864, 227 * 1024, 0, per_sm), None);
    }

    #[test]
    fn only_half_precision_weights_have_a_fused_entry_in_its_family() {
        let family = crate::cuda::compile::family("mlp_fused").expect("the mlp_fused family");
        for kind in ["gemv_f16", "gemv_bf16"] {
            for form in [MlpForm::Wave, MlpForm::Walk] {
                let entry = fused_entry(kind, form).expect("an entry");
                assert!(family.symbols.contains(&entry), "{entry}");
            }
            assert_eq!(fused_entry(kind, MlpForm::Two), None);
        }
        assert_eq!(fused_entry("gemv_f32", MlpForm::Wave), None);
        assert_eq!(fused_entry("gemv_f32", MlpForm::Walk), None);
    }

    #[test]
    fn the_switch_names_the_form() {
        assert_eq!(MlpForm::parse(None), MlpForm::Two);
        assert_eq!(MlpForm::parse(Some("0")), MlpForm::Two);
        assert_eq!(MlpForm::parse(Some("1")), MlpForm::Wave);
        assert_eq!(MlpForm::parse(Some("wave")), MlpForm::Wave);
        assert_eq!(MlpForm::parse(Some("walk")), MlpForm::Walk);
        assert_eq!(MlpForm::parse(Some("Walk")), MlpForm::Two);
        // A value that names no form is reported, not taken for one.
        for known in [None, Some("0"), Some("1"), Some("wave"), Some("walk")] {
            assert!(MlpForm::known(known), "{known:?}");
        }
        assert!(!MlpForm::known(Some("Walk")));
        assert!(!MlpForm::known(Some("")));
    }
}
