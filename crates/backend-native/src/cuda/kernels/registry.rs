//! The kernel registry: every family of `kernels/` compiled (or read from the disk cache) and
//! loaded as a module for the device, with what the launches need to know of it (its shared
//! memory, clusters, resident blocks, the rules fitted at load).

use super::decode_device::{DecodeDevice, DecodeHeads};
use super::int4_mma::Int4Mma;
use super::kv::KvKind;
use super::one_row::{DecodeGemv, OneRow, row_plans};
use super::prompt_device::PromptDevice;
use super::{shared, waves};
use crate::cuda::compile::{self, Origin, SOURCES};
use crate::cuda::device::Device;
use crate::cuda::launch::launch_error;
use crate::error::Error;
use crate::settings::CudaTuning;
use cudarc::driver::CudaFunction;
use cudarc::nvrtc::Ptx;
use std::collections::HashMap;

/// Every kernel, loaded.
pub(crate) struct Kernels {
    pub(super) functions: HashMap<&'static str, CudaFunction>,
    /// Families compiled by NVRTC at this load, and read from the disk cache.
    pub compiled: usize,
    pub cached: usize,
    /// Whether launches may be programmatic dependent launches: the device is sm_90 or later
    /// and `CudaTuning::pdl` allows them.
    pub pdl: bool,
    /// Which kernel one-row linear layers use (`CudaTuning::decode_gemv`; the default is
    /// fitted to a model by `fit_gemv_rule`).
    pub decode_gemv: DecodeGemv,
    /// Whether the tuning named the rule (then no model changes it).
    pub(super) decode_gemv_named: bool,
    /// The shared memory and clusters the decode-attention kernel may use here.
    pub decode: DecodeDevice,
    /// What the prompt-attention kernels may use here (`kernels/prompt.rs`).
    pub prompt: PromptDevice,
    /// Whether the device has the mma.sync tensor-core products (sm_80 or later), which the
    /// kernels that use them compile out before.
    pub mma: bool,
    /// One-row plans named by shape (`CudaTuning::row_plans`), over any rule's.
    pub(super) row_plans: HashMap<(usize, usize), OneRow>,
    /// Blocks of each one-row dense GEMV the device holds at once (the `waves` split rule).
    pub(super) resident: HashMap<&'static str, usize>,
    /// The device's SMs, and the dynamic shared memory a block of `gemv_decode_shared_*` may
    /// take here (0: none; `kernels/shared.rs`).
    pub(super) sms: usize,
    pub(super) shared_max: usize,
    /// Blocks of a shared entry an SM holds at a number of dynamic shared-memory bytes, as the
    /// occupancy query answered (asked once per pair, not at every eager launch).
    pub(super) shared_per_sm: std::sync::Mutex<HashMap<(&'static str, usize), usize>>,
    /// Where the tensor-core int4 kernels may run here, and which of their entries a launch
    /// takes.
    pub int4_mma: Int4Mma,
    /// The tuning the kernels were loaded under (what launches read of it: the dequantised
    /// slices' width, the skinny kernel's rows).
    pub tuning: CudaTuning,
}

impl Kernels {
    /// The device's SMs (0 where the driver did not say).
    pub(crate) fn sms(&self) -> usize {
        self.sms
    }

    /// Compiles (or reads from the cache) and loads every family for the device under
    /// `tuning` (its NVRTC definitions and kernel cache, its rules). Families compile in
    /// parallel (NVRTC programs are independent); a cached cubin the driver rejects is
    /// compiled again.
    pub fn load(device: &Device, tuning: &CudaTuning) -> Result<Kernels, Error> {
        let arch = device.arch.as_str();
        let build = compile::Build::of(tuning);
        let cubins: Vec<Result<(Vec<u8>, Origin), Error>> = std::thread::scope(|scope| {
            let build = &build;
            let jobs: Vec<_> = SOURCES
                .iter()
                .map(|source| scope.spawn(move || compile::cubin(source, arch, build)))
                .collect();
            jobs.into_iter()
                .map(|job| {
                    job.join().unwrap_or_else(|_| {
                        Err(Error::Cuda {
                            what: "NVRTC",
                            message: "a compile thread panicked".into(),
                        })
                    })
                })
                .collect()
        });
        let mut functions = HashMap::new();
        let (mut compiled, mut cached) = (0, 0);
        for (source, cubin) in SOURCES.iter().zip(cubins) {
            let (cubin, origin) = cubin?;
            let module = match device.ctx.load_module(Ptx::from_binary(cubin)) {
                Ok(module) => {
                    match origin {
                        Origin::Cache => cached += 1,
                        Origin::Compiled => compiled += 1,
                    }
                    module
                }
                Err(_) if origin == Origin::Cache => {
                    compiled += 1;
                    let fresh = compile::compile(source, arch, &build.defines)?;
                    compile::store(source, arch, &fresh, &build);
                    device
                        .ctx
                        .load_module(Ptx::from_binary(fresh))
                        .map_err(launch_error("module load"))?
                }
                Err(e) => return Err(launch_error("module load")(e)),
            };
            for &symbol in source.symbols {
                let f = module
                    .load_function(symbol)
                    .map_err(launch_error("function lookup"))?;
                functions.insert(symbol, f);
            }
        }
        let attention = KvKind::ALL
            .iter()
            .map(|kind| {
                functions.get(kind.decode_entry()).ok_or(Error::Cuda {
                    what: "kernel lookup",
                    message: format!("{} is not loaded", kind.decode_entry()),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let decode = DecodeDevice::probe(&device.ctx, device.major, &attention, tuning);
        let prompt = PromptDevice::probe(&device.ctx, device.major, &functions, tuning);
        let int4_mma = Int4Mma::probe(&device.ctx, device.major, &functions, tuning.int4_mma);
        let named = tuning.decode_gemv;
        let decode_gemv = named.unwrap_or(DecodeGemv::Shared);
        // Every rule plans with the resident block counts (occupancy queries at load).
        let resident = waves::resident_blocks(&device.ctx, &functions);
        let row_plans = row_plans(&tuning.row_plans);
        let sms = waves::multiprocessors(&device.ctx);
        let shared_max = shared::prepare(&device.ctx, &functions);
        Ok(Kernels {
            functions,
            compiled,
            cached,
            pdl: device.major >= 9 && tuning.pdl,
            decode_gemv,
            decode_gemv_named: named.is_some(),
            decode,
            prompt,
            mma: device.major >= 8,
            row_plans,
            resident,
            sms,
            shared_max,
            shared_per_sm: Default::default(),
            int4_mma,
            tuning: tuning.clone(),
        })
    }

    /// Whether one-token attention of this geometry runs as the fused decode kernel here.
    pub(crate) fn decode_fits(&self, d: &DecodeHeads) -> bool {
        d.supported() && self.decode.mode(d).is_some()
    }

    pub(crate) fn get(&self, name: &'static str) -> Result<&CudaFunction, Error> {
        self.functions.get(name).ok_or(Error::Cuda {
            what: "kernel lookup",
            message: format!("{name} is not loaded"),
        })
    }
}
