//! The native decoders' tuning, typed: every switch of the CPU and CUDA decoders, parsed once
//! from a source the caller names ([`NativeTuning::from_lookup`]; the library never reads the
//! environment) and carried down in [`crate::CpuOptions`] and `CudaOptions`. Compiled with or
//! without the `cuda` feature, so the parsing is tested where there is no GPU. `Default` is the
//! shipped behaviour (and what an empty environment gives); [`NativeTuning::effective_settings`]
//! lists every knob with its value, defaults included, in the syntax its variable accepts.

use crate::cpu::kernels::Isa;
use crate::error::Error;
use crate::paging::VramBudget;
use std::path::PathBuf;

/// The native decoders' tuning.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NativeTuning {
    pub cpu: CpuTuning,
    pub cuda: CudaTuning,
}

/// The CPU decoder's tuning.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuTuning {
    /// `GENAI_BRIDGE_CPU_ISA`: the highest instruction set the kernels may use (`None`: the
    /// best this CPU has). Every level gives the same bits; a cap only moves time.
    pub isa_cap: Option<Isa>,
    /// `GENAI_BRIDGE_MEMORY_LIMIT`: host memory the decoder treats as available at most, in
    /// bytes (`None`: what the system reports).
    pub memory_limit: Option<u64>,
}

/// The CUDA decoder's tuning. Apart from the memory limit, the kernel cache and the NVRTC
/// definitions, every field is an A/B switch of the shipped path (docs/cuda.md names the round
/// that measured each): the default is what ships.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaTuning {
    /// `GENAI_BRIDGE_CUDA_GRAPH`: capture the decode step as a CUDA graph (else eager).
    pub graph: bool,
    /// `GENAI_BRIDGE_DEVICE_SAMPLING`: choose tokens on the device where the generator allows.
    pub device_sampling: bool,
    /// `GENAI_BRIDGE_RUN_AHEAD`: enqueue the next step on a device-chosen token before the host
    /// reads it (not while weights stream or steps are timed, nor without the graph).
    pub run_ahead: bool,
    /// `GENAI_BRIDGE_PREFILL_GEMM`: prompts' linear layers as cuBLAS GEMMs where cuBLAS loads.
    pub prefill_gemm: bool,
    /// `GENAI_BRIDGE_PDL`: programmatic dependent launches (sm_90 and later).
    pub pdl: bool,
    /// `GENAI_BRIDGE_STEP_EVENTS`: time every single-token step with events.
    pub step_events: bool,
    /// `GENAI_BRIDGE_KV_F32`: the KV cache in f32 whatever the activations' precision.
    pub kv_f32: bool,
    /// `GENAI_BRIDGE_DECODE_CLUSTER`: decode-attention splits merged in clusters (`Some(true)`:
    /// wherever clusters exist), through global memory (`Some(false)`), or by the rule (`None`).
    pub decode_cluster: Option<bool>,
    /// `GENAI_BRIDGE_DECODE_TRIGGER`: when every decode attention lets the next kernel start
    /// (`None`: the rule).
    pub decode_trigger: Option<DecodeTrigger>,
    /// `GENAI_BRIDGE_DECODE_RESERVE`: every decode attention asks for an f32 cache's stage.
    pub decode_reserve: bool,
    /// `GENAI_BRIDGE_DECODE_GEMV`: the one-row dense GEMVs' rule (`None`: `Shared`, widened to
    /// `SharedWalk` where a model's layers all take the shared entry).
    pub decode_gemv: Option<DecodeGemvRule>,
    /// `GENAI_BRIDGE_ROW_PLAN`: one-row dense launches whose shape is named take that plan.
    pub row_plans: Vec<RowPlan>,
    /// `GENAI_BRIDGE_PROMPT_ATTENTION`: the prompt-attention kernels allowed.
    pub prompt_attention: PromptAttention,
    /// `GENAI_BRIDGE_PROMPT_BLOCKS_PER_SM`: tensor-core prompt blocks an SM the spans are
    /// planned for (`None`: as many as fit at once).
    pub prompt_blocks_per_sm: Option<usize>,
    /// `GENAI_BRIDGE_INT4_MMA`: the one-row int4 tensor-core kernel and its entries.
    pub int4_mma: Int4Mma,
    /// `GENAI_BRIDGE_INT4_SCALES`: keep the model's f16 scales beside the f32 ones where a
    /// layer suits the tensor-core kernel (`f16`), or only f32 scales (`f32`).
    pub int4_half_scales: bool,
    /// `GENAI_BRIDGE_INT4_SKINNY`: the most prompt rows an int4 layer runs through the GEMM
    /// that dequantises in its loads (0: none; 16 or 32).
    pub int4_skinny_rows: usize,
    /// `GENAI_BRIDGE_DEQUANT_MI`: values of an int4 layer dequantised per prompt GEMM.
    pub dequant_values: usize,
    /// `GENAI_BRIDGE_DEVICE_MEMORY_LIMIT`: device memory treated as free at most, in bytes
    /// (`None`: what the driver reports).
    pub device_memory_limit: Option<u64>,
    /// `GENAI_BRIDGE_KERNEL_CACHE` (else `$XDG_CACHE_HOME/genai-bridge/kernels`, else
    /// `$HOME/.cache/genai-bridge/kernels`): where compiled kernels are cached (`None`: no
    /// disk cache, every load compiles).
    pub kernel_cache: Option<PathBuf>,
    /// `GENAI_BRIDGE_NVRTC_DEFINES`: preprocessor definitions for every kernel family (tuning
    /// runs: `W_EVICT=0`; the prototypes' `SP_*` knobs). They enter the kernel cache's key.
    pub nvrtc_defines: Vec<NvrtcDefine>,
}

impl Default for CudaTuning {
    fn default() -> Self {
        CudaTuning {
            graph: true,
            device_sampling: true,
            run_ahead: true,
            prefill_gemm: true,
            pdl: true,
            step_events: false,
            kv_f32: false,
            decode_cluster: None,
            decode_trigger: None,
            decode_reserve: false,
            decode_gemv: None,
            row_plans: Vec::new(),
            prompt_attention: PromptAttention::Best,
            prompt_blocks_per_sm: None,
            int4_mma: Int4Mma::Auto,
            int4_half_scales: true,
            int4_skinny_rows: SKINNY_DEFAULT_ROWS,
            dequant_values: DEQUANT_DEFAULT_MI << 20,
            device_memory_limit: None,
            kernel_cache: None,
            nvrtc_defines: Vec::new(),
        }
    }
}

/// Rows the skinny int4 prompt GEMM takes by default: two row tiles (H200, docs/cuda.md round 36,
/// against the dequantised GEMMs: Llama-3-8B int4 about half the time to the first token at
/// 8-16 tokens, Qwen2.5-0.5B/1.5B a fifth to a third less; 11-35% less at 32 tokens).
pub const SKINNY_DEFAULT_ROWS: usize = 32;

/// Mi values of an int4 layer dequantised per prompt GEMM by default (64 MiB at f16). Round 35
/// (H200, Llama-3-8B int4): 32 Mi against 16 Mi took the time to first token from 13.8 to 13.0
/// ms at 128 tokens and from 244 to 232 ms at 3,584; 64 Mi gave the same as 32 for twice the
/// memory.
pub const DEQUANT_DEFAULT_MI: usize = 32;

/// When a decode-attention block lets the kernel after it launch (programmatic dependent
/// launch): the dependent then fetches its first weights while this kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeTrigger {
    /// At the block's start (`0`).
    Start,
    /// Once its wait for the kernel before has returned (`1`).
    AfterWait,
    /// Once its warps are done with their keys and values (`2`).
    AfterKeys,
}

/// The one-row dense GEMVs' rules kept as A/B sides (docs/cuda.md, rounds 10, 18-19).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeGemvRule {
    /// `pipe`: the wave-aware walk, long rows on the pipelined entry (the default before
    /// round 18).
    Pipe,
    /// `shared`: as `pipe`, and walks that cannot be wholly in flight before their wait take
    /// the shared-memory entry where all their blocks are resident (the default, not widened).
    Shared,
    /// `shared-walk`: as `shared` for every walk (the default for models whose layers all
    /// take the shared entry).
    SharedWalk,
}

/// An entry of a dense linear kernel for one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowEntry {
    /// `walk`: `gemv_decode_*`.
    Walk,
    /// `pipe`: `gemv_decode_pipe_*`.
    Pipe,
    /// `shared`: `gemv_decode_shared_*`.
    Shared,
}

/// A one-row dense launch of `n` outputs over `k` inputs forced onto `entry` at `split` warps
/// per column pair (`GENAI_BRIDGE_ROW_PLAN`'s `NxK=ENTRY:SPLIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowPlan {
    pub n: usize,
    pub k: usize,
    pub entry: RowEntry,
    pub split: usize,
}

/// Which prompt-attention kernels may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptAttention {
    /// `auto`: the best that fits (tensor cores, tiled, split).
    Best,
    /// `tiled`: the tiled f32 kernel where it fits (no tensor cores).
    Tiled,
    /// `split`: the split kernel for every prompt.
    Split,
}

/// The one-row int4 tensor-core kernel: which entries its launches take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Int4Mma {
    /// `auto`: wide where the deep launch needs more than one wave.
    Auto,
    /// `0`: off (the scalar kernel for every CompFp32 row).
    Off,
    /// `deep`: every launch on the deep entries.
    Deep,
    /// `wide`: every launch on the wide entries.
    Wide,
}

/// One NVRTC preprocessor definition: a C identifier and a value of letters and digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvrtcDefine {
    pub name: String,
    pub value: String,
}

impl NvrtcDefine {
    /// The NVRTC option (`-DNAME=VALUE`).
    pub fn option(&self) -> String {
        format!("-D{}={}", self.name, self.value)
    }
}

impl RowEntry {
    /// The entry's name in `GENAI_BRIDGE_ROW_PLAN`.
    pub fn name(self) -> &'static str {
        match self {
            RowEntry::Walk => "walk",
            RowEntry::Pipe => "pipe",
            RowEntry::Shared => "shared",
        }
    }
}

/// Every variable [`NativeTuning::from_lookup`] reads, besides `XDG_CACHE_HOME` and `HOME` (the
/// kernel cache's default location).
pub const VARIABLES: &[&str] = &[
    CPU_ISA,
    MEMORY_LIMIT,
    CUDA_GRAPH,
    DEVICE_SAMPLING,
    RUN_AHEAD,
    PREFILL_GEMM,
    PDL,
    STEP_EVENTS,
    KV_F32,
    DECODE_CLUSTER,
    DECODE_TRIGGER,
    DECODE_RESERVE,
    DECODE_GEMV,
    ROW_PLAN,
    PROMPT_ATTENTION,
    PROMPT_BLOCKS_PER_SM,
    INT4_MMA,
    INT4_SCALES,
    INT4_SKINNY,
    DEQUANT_MI,
    DEVICE_MEMORY_LIMIT,
    KERNEL_CACHE,
    NVRTC_DEFINES,
];

pub const CPU_ISA: &str = "GENAI_BRIDGE_CPU_ISA";
pub const MEMORY_LIMIT: &str = "GENAI_BRIDGE_MEMORY_LIMIT";
pub const CUDA_GRAPH: &str = "GENAI_BRIDGE_CUDA_GRAPH";
pub const DEVICE_SAMPLING: &str = "GENAI_BRIDGE_DEVICE_SAMPLING";
pub const RUN_AHEAD: &str = "GENAI_BRIDGE_RUN_AHEAD";
pub const PREFILL_GEMM: &str = "GENAI_BRIDGE_PREFILL_GEMM";
pub const PDL: &str = "GENAI_BRIDGE_PDL";
pub const STEP_EVENTS: &str = "GENAI_BRIDGE_STEP_EVENTS";
pub const KV_F32: &str = "GENAI_BRIDGE_KV_F32";
pub const DECODE_CLUSTER: &str = "GENAI_BRIDGE_DECODE_CLUSTER";
pub const DECODE_TRIGGER: &str = "GENAI_BRIDGE_DECODE_TRIGGER";
pub const DECODE_RESERVE: &str = "GENAI_BRIDGE_DECODE_RESERVE";
pub const DECODE_GEMV: &str = "GENAI_BRIDGE_DECODE_GEMV";
pub const ROW_PLAN: &str = "GENAI_BRIDGE_ROW_PLAN";
pub const PROMPT_ATTENTION: &str = "GENAI_BRIDGE_PROMPT_ATTENTION";
pub const PROMPT_BLOCKS_PER_SM: &str = "GENAI_BRIDGE_PROMPT_BLOCKS_PER_SM";
pub const INT4_MMA: &str = "GENAI_BRIDGE_INT4_MMA";
pub const INT4_SCALES: &str = "GENAI_BRIDGE_INT4_SCALES";
pub const INT4_SKINNY: &str = "GENAI_BRIDGE_INT4_SKINNY";
pub const DEQUANT_MI: &str = "GENAI_BRIDGE_DEQUANT_MI";
pub const DEVICE_MEMORY_LIMIT: &str = "GENAI_BRIDGE_DEVICE_MEMORY_LIMIT";
pub const KERNEL_CACHE: &str = "GENAI_BRIDGE_KERNEL_CACHE";
pub const NVRTC_DEFINES: &str = "GENAI_BRIDGE_NVRTC_DEFINES";

/// The one error of a malformed value: the variable, the value, what it accepts.
fn bad(name: &'static str, value: &str, expected: &str) -> Error {
    Error::Setting {
        name,
        value: value.to_string(),
        expected: expected.to_string(),
    }
}

/// A variable's value, trimmed; an empty value counts as unset.
fn read(lookup: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    lookup(name)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// `0` or `1`, else `default` when unset.
fn flag(
    lookup: &dyn Fn(&str) -> Option<String>,
    name: &'static str,
    default: bool,
) -> Result<bool, Error> {
    match read(lookup, name).as_deref() {
        None => Ok(default),
        Some("0") => Ok(false),
        Some("1") => Ok(true),
        Some(v) => Err(bad(name, v, "0 or 1")),
    }
}

/// One of `choices` (the value's spelling, and what it means), else `default` when unset.
fn choice<T: Copy>(
    lookup: &dyn Fn(&str) -> Option<String>,
    name: &'static str,
    choices: &[(&str, T)],
    default: T,
) -> Result<T, Error> {
    let Some(v) = read(lookup, name) else {
        return Ok(default);
    };
    choices
        .iter()
        .find(|(word, _)| *word == v)
        .map(|&(_, t)| t)
        .ok_or_else(|| {
            let words: Vec<&str> = choices.iter().map(|(w, _)| *w).collect();
            bad(name, &v, &words.join(", "))
        })
}

/// A number of bytes (`8000000000`, `8GB`, ...) or `none`, else `None` when unset.
fn bytes_limit(
    lookup: &dyn Fn(&str) -> Option<String>,
    name: &'static str,
) -> Result<Option<u64>, Error> {
    match read(lookup, name) {
        None => Ok(None),
        Some(v) if v == "none" => Ok(None),
        Some(v) => match VramBudget::parse(&v) {
            Ok(VramBudget::Bytes(b)) => Ok(Some(b)),
            _ => Err(bad(
                name,
                &v,
                "a number of bytes (e.g. 8000000000 or 8GB) or none",
            )),
        },
    }
}

const CLUSTER_CHOICES: &[(&str, Option<bool>)] =
    &[("auto", None), ("0", Some(false)), ("1", Some(true))];
const TRIGGER_CHOICES: &[(&str, Option<DecodeTrigger>)] = &[
    ("auto", None),
    ("0", Some(DecodeTrigger::Start)),
    ("1", Some(DecodeTrigger::AfterWait)),
    ("2", Some(DecodeTrigger::AfterKeys)),
];
const GEMV_CHOICES: &[(&str, Option<DecodeGemvRule>)] = &[
    ("auto", None),
    ("pipe", Some(DecodeGemvRule::Pipe)),
    ("shared", Some(DecodeGemvRule::Shared)),
    ("shared-walk", Some(DecodeGemvRule::SharedWalk)),
];
const PROMPT_CHOICES: &[(&str, PromptAttention)] = &[
    ("auto", PromptAttention::Best),
    ("tiled", PromptAttention::Tiled),
    ("split", PromptAttention::Split),
];
const INT4_MMA_CHOICES: &[(&str, Int4Mma)] = &[
    ("auto", Int4Mma::Auto),
    ("0", Int4Mma::Off),
    ("deep", Int4Mma::Deep),
    ("wide", Int4Mma::Wide),
];
const SCALES_CHOICES: &[(&str, bool)] = &[("f16", true), ("f32", false)];
const SKINNY_CHOICES: &[(&str, usize)] = &[("0", 0), ("16", 16), ("32", 32)];
const ISA_CHOICES: &[(&str, Option<Isa>)] = &[
    ("best", None),
    ("scalar", Some(Isa::Scalar)),
    ("avx2", Some(Isa::Avx2)),
    ("avx512", Some(Isa::Avx512)),
    ("avx512vnni", Some(Isa::Avx512Vnni)),
];

/// The spelling of `value` among `choices`.
fn word<T: PartialEq>(choices: &[(&'static str, T)], value: &T) -> String {
    choices
        .iter()
        .find(|(_, t)| t == value)
        .map_or_else(String::new, |(w, _)| w.to_string())
}

fn row_plans(text: &str) -> Result<Vec<RowPlan>, Error> {
    const EXPECTED: &str = "NxK=ENTRY:SPLIT pairs, comma-separated (ENTRY walk, pipe or shared; \
                            SPLIT 1, 2 or 4), e.g. 6144x4096=pipe:2";
    let pair = |item: &str| -> Option<RowPlan> {
        let (shape, plan) = item.split_once('=')?;
        let (n, k) = shape.split_once('x')?;
        let (entry, split) = plan.split_once(':')?;
        let entry = [RowEntry::Walk, RowEntry::Pipe, RowEntry::Shared]
            .into_iter()
            .find(|r| r.name() == entry)?;
        let split: usize = split.parse().ok()?;
        let (n, k) = (n.parse().ok()?, k.parse().ok()?);
        [1, 2, 4]
            .contains(&split)
            .then_some(RowPlan { n, k, entry, split })
    };
    let items = text.split(',').map(str::trim).filter(|i| !i.is_empty());
    items
        .map(|item| pair(item).ok_or_else(|| bad(ROW_PLAN, text, EXPECTED)))
        .collect()
}

fn nvrtc_defines(text: &str) -> Result<Vec<NvrtcDefine>, Error> {
    let ident = |s: &str| {
        s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let define = |word: &str| {
        let (name, value) = word.split_once('=')?;
        let ok =
            ident(name) && !value.is_empty() && value.chars().all(|c| c.is_ascii_alphanumeric());
        ok.then(|| NvrtcDefine {
            name: name.to_string(),
            value: value.to_string(),
        })
    };
    let words = text.split([',', ' ']).filter(|w| !w.is_empty());
    let bad_words: Vec<&str> = words.clone().filter(|w| define(w).is_none()).collect();
    if !bad_words.is_empty() {
        let expected = format!(
            "NAME=VALUE words separated by commas or spaces (a C identifier, '=', letters and \
             digits); not so: {bad_words:?}"
        );
        return Err(bad(NVRTC_DEFINES, text, &expected));
    }
    Ok(words.filter_map(define).collect())
}

/// The kernel cache folder: the variable's (`off`: none), else under `$XDG_CACHE_HOME`, else
/// under `$HOME/.cache`, else none.
fn kernel_cache(lookup: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    match read(lookup, KERNEL_CACHE) {
        Some(v) if v == "off" => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => read(lookup, "XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| read(lookup, "HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|base| base.join("genai-bridge").join("kernels")),
    }
}

impl NativeTuning {
    /// The tuning `lookup` gives (a variable's value, or `None` when it is unset): each of
    /// [`VARIABLES`] unset or empty takes its default; a malformed value is an error naming the
    /// variable, the value and the accepted values. Only [`VARIABLES`], `XDG_CACHE_HOME` and
    /// `HOME` are looked up.
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let d = CudaTuning::default();
        let prompt_blocks_per_sm = match read(lookup, PROMPT_BLOCKS_PER_SM) {
            None => None,
            Some(v) if v == "auto" => None,
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Err(bad(PROMPT_BLOCKS_PER_SM, &v, "a positive integer or auto")),
            },
        };
        let dequant_values = match read(lookup, DEQUANT_MI) {
            None => d.dequant_values,
            Some(v) => match v.parse::<usize>() {
                Ok(mi) if mi.is_power_of_two() && mi <= 256 => mi << 20,
                _ => return Err(bad(DEQUANT_MI, &v, "a power of two from 1 to 256")),
            },
        };
        let cuda = CudaTuning {
            graph: flag(lookup, CUDA_GRAPH, d.graph)?,
            device_sampling: flag(lookup, DEVICE_SAMPLING, d.device_sampling)?,
            run_ahead: flag(lookup, RUN_AHEAD, d.run_ahead)?,
            prefill_gemm: flag(lookup, PREFILL_GEMM, d.prefill_gemm)?,
            pdl: flag(lookup, PDL, d.pdl)?,
            step_events: flag(lookup, STEP_EVENTS, d.step_events)?,
            kv_f32: flag(lookup, KV_F32, d.kv_f32)?,
            decode_cluster: choice(lookup, DECODE_CLUSTER, CLUSTER_CHOICES, None)?,
            decode_trigger: choice(lookup, DECODE_TRIGGER, TRIGGER_CHOICES, None)?,
            decode_reserve: flag(lookup, DECODE_RESERVE, d.decode_reserve)?,
            decode_gemv: choice(lookup, DECODE_GEMV, GEMV_CHOICES, None)?,
            row_plans: row_plans(&read(lookup, ROW_PLAN).unwrap_or_default())?,
            prompt_attention: choice(lookup, PROMPT_ATTENTION, PROMPT_CHOICES, d.prompt_attention)?,
            prompt_blocks_per_sm,
            int4_mma: choice(lookup, INT4_MMA, INT4_MMA_CHOICES, d.int4_mma)?,
            int4_half_scales: choice(lookup, INT4_SCALES, SCALES_CHOICES, d.int4_half_scales)?,
            int4_skinny_rows: choice(lookup, INT4_SKINNY, SKINNY_CHOICES, d.int4_skinny_rows)?,
            dequant_values,
            device_memory_limit: bytes_limit(lookup, DEVICE_MEMORY_LIMIT)?,
            kernel_cache: kernel_cache(lookup),
            nvrtc_defines: nvrtc_defines(&read(lookup, NVRTC_DEFINES).unwrap_or_default())?,
        };
        let cpu = CpuTuning {
            isa_cap: choice(lookup, CPU_ISA, ISA_CHOICES, None)?,
            memory_limit: bytes_limit(lookup, MEMORY_LIMIT)?,
        };
        Ok(NativeTuning { cpu, cuda })
    }

    /// Every knob of [`VARIABLES`] with its effective value, defaults included, in the syntax
    /// its variable accepts (`from_lookup` of this list gives this tuning back): for
    /// `route --json` / `bench --json`.
    pub fn effective_settings(&self) -> Vec<(&'static str, String)> {
        let (c, g) = (&self.cpu, &self.cuda);
        let b = |v: bool| if v { "1" } else { "0" }.to_string();
        let limit = |v: Option<u64>| v.map_or_else(|| "none".to_string(), |b| b.to_string());
        let rows: Vec<String> = g
            .row_plans
            .iter()
            .map(|p| format!("{}x{}={}:{}", p.n, p.k, p.entry.name(), p.split))
            .collect();
        let defines: Vec<String> = g
            .nvrtc_defines
            .iter()
            .map(|d| format!("{}={}", d.name, d.value))
            .collect();
        let cache = g
            .kernel_cache
            .as_ref()
            .map_or_else(|| "off".to_string(), |p| p.display().to_string());
        let blocks = g
            .prompt_blocks_per_sm
            .map_or_else(|| "auto".to_string(), |n| n.to_string());
        vec![
            (CPU_ISA, word(ISA_CHOICES, &c.isa_cap)),
            (MEMORY_LIMIT, limit(c.memory_limit)),
            (CUDA_GRAPH, b(g.graph)),
            (DEVICE_SAMPLING, b(g.device_sampling)),
            (RUN_AHEAD, b(g.run_ahead)),
            (PREFILL_GEMM, b(g.prefill_gemm)),
            (PDL, b(g.pdl)),
            (STEP_EVENTS, b(g.step_events)),
            (KV_F32, b(g.kv_f32)),
            (DECODE_CLUSTER, word(CLUSTER_CHOICES, &g.decode_cluster)),
            (DECODE_TRIGGER, word(TRIGGER_CHOICES, &g.decode_trigger)),
            (DECODE_RESERVE, b(g.decode_reserve)),
            (DECODE_GEMV, word(GEMV_CHOICES, &g.decode_gemv)),
            (ROW_PLAN, rows.join(",")),
            (PROMPT_ATTENTION, word(PROMPT_CHOICES, &g.prompt_attention)),
            (PROMPT_BLOCKS_PER_SM, blocks),
            (INT4_MMA, word(INT4_MMA_CHOICES, &g.int4_mma)),
            (INT4_SCALES, word(SCALES_CHOICES, &g.int4_half_scales)),
            (INT4_SKINNY, word(SKINNY_CHOICES, &g.int4_skinny_rows)),
            (DEQUANT_MI, (g.dequant_values >> 20).to_string()),
            (DEVICE_MEMORY_LIMIT, limit(g.device_memory_limit)),
            (KERNEL_CACHE, cache),
            (NVRTC_DEFINES, defines.join(",")),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(pairs: &[(&str, &str)]) -> Result<NativeTuning, Error> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        NativeTuning::from_lookup(&|name| map.get(name).cloned())
    }

    #[test]
    fn an_empty_environment_is_the_default() {
        assert_eq!(parse(&[]).expect("no variables"), NativeTuning::default());
        let empty: Vec<(&str, &str)> = VARIABLES.iter().map(|&v| (v, "  ")).collect();
        assert_eq!(
            parse(&empty).expect("empty values"),
            NativeTuning::default()
        );
    }

    #[test]
    fn every_knob_is_listed_and_the_list_parses_back() {
        let default = NativeTuning::default();
        let listed = default.effective_settings();
        let names: Vec<&str> = listed.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, VARIABLES);
        let pairs = [
            (CPU_ISA, "avx2"),
            (MEMORY_LIMIT, "4GB"),
            (CUDA_GRAPH, "0"),
            (DEVICE_SAMPLING, "0"),
            (RUN_AHEAD, "0"),
            (PREFILL_GEMM, "0"),
            (PDL, "0"),
            (STEP_EVENTS, "1"),
            (KV_F32, "1"),
            (DECODE_CLUSTER, "0"),
            (DECODE_TRIGGER, "2"),
            (DECODE_RESERVE, "1"),
            (DECODE_GEMV, "shared-walk"),
            (ROW_PLAN, "6144x4096=pipe:2, 896x896=shared:4"),
            (PROMPT_ATTENTION, "tiled"),
            (PROMPT_BLOCKS_PER_SM, "4"),
            (INT4_MMA, "wide"),
            (INT4_SCALES, "f32"),
            (INT4_SKINNY, "16"),
            (DEQUANT_MI, "64"),
            (DEVICE_MEMORY_LIMIT, "8000000000"),
            (KERNEL_CACHE, "/cache"),
            (NVRTC_DEFINES, "W_EVICT=0 SP_U=4"),
        ];
        let set = parse(&pairs).expect("every variable set");
        assert_eq!(set.cpu.isa_cap, Some(Isa::Avx2));
        assert_eq!(set.cpu.memory_limit, Some(4_000_000_000));
        assert_eq!(set.cuda.decode_trigger, Some(DecodeTrigger::AfterKeys));
        assert_eq!(set.cuda.row_plans.len(), 2);
        assert_eq!(set.cuda.dequant_values, 64 << 20);
        assert_eq!(set.cuda.nvrtc_defines[0].option(), "-DW_EVICT=0");
        for tuning in [default, set] {
            let listed = tuning.effective_settings();
            let back: Vec<(&str, &str)> = listed.iter().map(|(n, v)| (*n, v.as_str())).collect();
            assert_eq!(parse(&back).expect("the listed values"), tuning);
        }
    }

    #[test]
    fn a_malformed_value_names_the_variable_and_the_accepted_values() {
        let err = |pairs: &[(&str, &str)]| parse(pairs).expect_err("malformed").to_string();
        assert_eq!(
            err(&[(CUDA_GRAPH, "maybe")]),
            "GENAI_BRIDGE_CUDA_GRAPH=\"maybe\": expected 0 or 1"
        );
        let e = err(&[(DECODE_GEMV, "onewave")]);
        assert!(
            e.contains(DECODE_GEMV) && e.contains("pipe, shared, shared-walk"),
            "{e}"
        );
        let e = err(&[(DEVICE_MEMORY_LIMIT, "lots")]);
        assert!(
            e.contains(DEVICE_MEMORY_LIMIT) && e.contains("bytes"),
            "{e}"
        );
        let e = err(&[(ROW_PLAN, "6144x4096=pipe:2,1x1=walk:3")]);
        assert!(e.contains(ROW_PLAN) && e.contains("SPLIT 1, 2 or 4"), "{e}");
        let e = err(&[(NVRTC_DEFINES, "A=1 bad =3 9A=1 Y=a;b Z= W=ok")]);
        for word in ["\"bad\"", "\"=3\"", "\"9A=1\"", "\"Y=a;b\"", "\"Z=\""] {
            assert!(e.contains(word), "{e} names {word}");
        }
        assert!(!e.contains("\"W=ok\"") && !e.contains("\"A=1\""), "{e}");
        for (name, value) in [
            (DEQUANT_MI, "48"),
            (DEQUANT_MI, "512"),
            (INT4_SKINNY, "8"),
            (PROMPT_BLOCKS_PER_SM, "0"),
            (PROMPT_BLOCKS_PER_SM, "-1"),
            (PROMPT_ATTENTION, "fast"),
            (INT4_MMA, "1"),
            (INT4_SCALES, "f8"),
            (DECODE_TRIGGER, "3"),
            (CPU_ISA, "sse2"),
            (MEMORY_LIMIT, "50%"),
            (STEP_EVENTS, "yes"),
        ] {
            let e = err(&[(name, value)]);
            assert!(
                e.starts_with(&format!("{name}=\"{value}\": expected ")),
                "{e}"
            );
        }
    }

    #[test]
    fn the_kernel_cache_follows_its_variable_then_the_xdg_folder_then_home() {
        let cache = |pairs: &[(&str, &str)]| parse(pairs).expect("valid").cuda.kernel_cache;
        let at = |p: &str| Some(PathBuf::from(p));
        assert_eq!(cache(&[(KERNEL_CACHE, "/k"), ("HOME", "/h")]), at("/k"));
        assert_eq!(cache(&[(KERNEL_CACHE, "off"), ("HOME", "/h")]), None);
        assert_eq!(
            cache(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]),
            at("/x/genai-bridge/kernels")
        );
        assert_eq!(
            cache(&[("HOME", "/h")]),
            at("/h/.cache/genai-bridge/kernels")
        );
        assert_eq!(cache(&[]), None);
    }

    #[test]
    fn only_the_named_variables_are_looked_up() {
        let asked = std::cell::RefCell::new(Vec::new());
        let lookup = |name: &str| {
            asked.borrow_mut().push(name.to_string());
            None
        };
        NativeTuning::from_lookup(&lookup).expect("defaults");
        for name in asked.borrow().iter() {
            let known =
                VARIABLES.contains(&name.as_str()) || name == "XDG_CACHE_HOME" || name == "HOME";
            assert!(known, "{name} is not a named variable");
        }
    }
}
