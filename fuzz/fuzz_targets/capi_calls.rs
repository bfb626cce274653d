//! Fuzz target `capi_calls`: the bytes are a program of C ABI calls (the `Oga*` exports of
//! genai-capi, declared here as a C client declares them) with fuzzed arguments: null handles,
//! destroyed (stale) handles, handles of the wrong type, null out-pointers, hostile strings and
//! numbers. The model is the tiny fixture `qwen2-fp32-cpu` on the native decoder
//! (`GENAI_BRIDGE_BACKEND=native`; ONNX Runtime is made unavailable). No call may crash; the
//! contract of the header (valid buffers and NUL-terminated strings) is kept.

#![no_main]

use std::ffi::{CStr, CString, c_char, c_void};
use std::path::PathBuf;
use std::ptr;
use std::sync::LazyLock;

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;

// Make sure the C ABI crate is linked, so the declarations below resolve.
use onnxruntime_genai as _;

#[repr(C)]
struct Opaque {
    _private: [u8; 0],
}
type H = *mut Opaque;
type R = *mut Opaque;

unsafe extern "C" {
    fn OgaResultGetError(result: *const Opaque) -> *const c_char;
    fn OgaDestroyResult(result: R);
    fn OgaDestroyString(text: *const c_char);

    fn OgaCreateConfig(path: *const c_char, out: *mut H) -> R;
    fn OgaDestroyConfig(config: H);
    fn OgaConfigClearProviders(config: H) -> R;
    fn OgaConfigAppendProvider(config: H, provider: *const c_char) -> R;
    fn OgaConfigSetProviderOption(
        config: H,
        provider: *const c_char,
        key: *const c_char,
        value: *const c_char,
    ) -> R;
    fn OgaConfigOverlay(config: H, json: *const c_char) -> R;

    fn OgaCreateModel(path: *const c_char, out: *mut H) -> R;
    fn OgaCreateModelFromConfig(config: H, out: *mut H) -> R;
    fn OgaDestroyModel(model: H);
    fn OgaModelGetType(model: H, out: *mut *const c_char) -> R;
    fn OgaModelGetDeviceType(model: H, out: *mut *const c_char) -> R;

    fn OgaCreateTokenizer(model: H, out: *mut H) -> R;
    fn OgaDestroyTokenizer(tokenizer: H);
    fn OgaTokenizerEncode(tokenizer: H, text: *const c_char, sequences: H) -> R;
    fn OgaTokenizerDecode(
        tokenizer: H,
        tokens: *const i32,
        count: usize,
        out: *mut *const c_char,
    ) -> R;
    fn OgaTokenizerToTokenId(tokenizer: H, text: *const c_char, out: *mut i32) -> R;
    fn OgaTokenizerGetEosTokenIds(tokenizer: H, out: *mut *const i32, count: *mut usize) -> R;
    fn OgaTokenizerGetBosTokenId(tokenizer: H, out: *mut i32) -> R;
    fn OgaTokenizerApplyChatTemplate(
        tokenizer: H,
        template: *const c_char,
        messages: *const c_char,
        tools: *const c_char,
        add_generation_prompt: bool,
        out: *mut *const c_char,
    ) -> R;
    fn OgaTokenizerEncodeBatch(
        tokenizer: H,
        strings: *const *const c_char,
        count: usize,
        out: *mut H,
    ) -> R;
    fn OgaTokenizerDecodeBatch(tokenizer: H, tensor: H, out: *mut H) -> R;
    fn OgaCreateTokenizerStream(tokenizer: H, out: *mut H) -> R;
    fn OgaDestroyTokenizerStream(stream: H);
    fn OgaTokenizerStreamDecode(stream: H, token: i32, out: *mut *const c_char) -> R;

    fn OgaCreateSequences(out: *mut H) -> R;
    fn OgaDestroySequences(sequences: H);
    fn OgaSequencesCount(sequences: H) -> usize;
    fn OgaAppendTokenSequence(tokens: *const i32, count: usize, sequences: H) -> R;
    fn OgaAppendTokenToSequence(token: i32, sequences: H, index: usize) -> R;
    fn OgaSequencesGetSequenceCount(sequences: H, index: usize) -> usize;
    fn OgaSequencesGetSequenceData(sequences: H, index: usize) -> *const i32;

    fn OgaCreateGeneratorParams(model: H, out: *mut H) -> R;
    fn OgaDestroyGeneratorParams(params: H);
    fn OgaGeneratorParamsSetSearchNumber(params: H, name: *const c_char, value: f64) -> R;
    fn OgaGeneratorParamsSetSearchBool(params: H, name: *const c_char, value: bool) -> R;
    fn OgaGeneratorParamsGetSearchNumber(params: H, name: *const c_char, out: *mut f64) -> R;

    fn OgaCreateGenerator(model: H, params: H, out: *mut H) -> R;
    fn OgaDestroyGenerator(generator: H);
    fn OgaGenerator_IsDone(generator: H) -> bool;
    fn OgaGenerator_AppendTokens(generator: H, ids: *const i32, count: usize) -> R;
    fn OgaGenerator_AppendTokenSequences(generator: H, sequences: H) -> R;
    fn OgaGenerator_GenerateNextToken(generator: H) -> R;
    fn OgaGenerator_GetNextTokens(generator: H, out: *mut *const i32, count: *mut usize) -> R;
    fn OgaGenerator_SetRuntimeOption(generator: H, key: *const c_char, value: *const c_char) -> R;
    fn OgaGenerator_RewindTo(generator: H, length: usize) -> R;
    fn OgaGenerator_GetLogits(generator: H, out: *mut H) -> R;
    fn OgaGenerator_SetLogits(generator: H, tensor: H) -> R;
    fn OgaGenerator_GetOutput(generator: H, name: *const c_char, out: *mut H) -> R;
    fn OgaGenerator_GetSequenceCount(generator: H, index: usize) -> usize;
    fn OgaGenerator_GetSequenceData(generator: H, index: usize) -> *const i32;
    fn OgaGenerator_TokenCount(generator: H) -> usize;

    fn OgaCreateTensorFromBuffer(
        data: *mut c_void,
        shape: *const i64,
        rank: usize,
        element_type: i32,
        out: *mut H,
    ) -> R;
    fn OgaDestroyTensor(tensor: H);
    fn OgaTensorGetType(tensor: H, out: *mut i32) -> R;
    fn OgaTensorGetShapeRank(tensor: H, out: *mut usize) -> R;
    fn OgaTensorGetShape(tensor: H, shape: *mut i64, rank: usize) -> R;
    fn OgaTensorGetData(tensor: H, out: *mut *mut c_void) -> R;

    fn OgaCreateStringArray(out: *mut H) -> R;
    fn OgaDestroyStringArray(array: H);
    fn OgaStringArrayAddString(array: H, text: *const c_char) -> R;
    fn OgaStringArrayGetCount(array: H, out: *mut usize) -> R;
    fn OgaStringArrayGetString(array: H, index: usize, out: *mut *const c_char) -> R;
}

/// Kinds of handle the program juggles.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Config,
    Model,
    Tokenizer,
    Stream,
    Sequences,
    Params,
    Generator,
    Tensor,
    Strings,
    Result,
}

const KINDS: usize = 10;

/// The fixture model folder.
fn fixture(name: &str) -> CString {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../models/fixtures")
        .join(name);
    CString::new(dir.to_string_lossy().into_owned()).expect("no NUL in the fixture path")
}

/// A model and a tokenizer loaded once and kept for the whole run (never destroyed by the
/// program), so that most inputs exercise generation rather than loading.
struct Shared {
    model: usize,
    tokenizer: usize,
}

static SHARED: LazyLock<Shared> = LazyLock::new(|| {
    let mut model = ptr::null_mut();
    // SAFETY: valid C string and out pointer.
    let r = unsafe { OgaCreateModel(fixture("qwen2-fp32-cpu").as_ptr(), &mut model) };
    assert!(r.is_null(), "the fixture model loads: {}", message(r));
    let mut tokenizer = ptr::null_mut();
    // SAFETY: live model, valid out pointer.
    let r = unsafe { OgaCreateTokenizer(model, &mut tokenizer) };
    assert!(r.is_null(), "the fixture tokenizer loads: {}", message(r));
    Shared {
        model: model as usize,
        tokenizer: tokenizer as usize,
    }
});

/// Reads a result's message (the result stays alive).
fn message(r: R) -> String {
    // SAFETY: `r` is a result of this library (or null: the call says so).
    let text = unsafe { OgaResultGetError(r) };
    if text.is_null() {
        return String::new();
    }
    // SAFETY: a NUL-terminated string owned by the live result.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

/// The handles a program made: live ones and destroyed ones (kept to be passed again).
struct Program<'a, 'b> {
    u: &'a mut Unstructured<'b>,
    live: [Vec<usize>; KINDS],
    stale: [Vec<usize>; KINDS],
    /// Strings handed out by the library, not yet freed.
    strings: Vec<usize>,
    /// Models created by this program (loading is slow: at most two per input).
    models_made: usize,
    /// Decode steps taken (each runs the model).
    steps: usize,
}

/// Search option names the library knows, and some it does not.
const NUMBER_NAMES: &[&str] = &[
    "max_length",
    "min_length",
    "top_k",
    "top_p",
    "temperature",
    "repetition_penalty",
    "num_beams",
    "num_return_sequences",
    "batch_size",
    "length_penalty",
    "no_repeat_ngram_size",
    "diversity_penalty",
    "random_seed",
    "chunk_size",
    "bogus",
];
const BOOL_NAMES: &[&str] = &[
    "do_sample",
    "early_stopping",
    "past_present_share_buffer",
    "x",
];
const WORDS: &[&str] = &[
    "",
    "hello world",
    "cpu",
    "cuda",
    "logits",
    "terminate_session",
    "0",
    "1",
    "<|im_start|>",
    "{\"search\":{\"max_length\":8}}",
    "{\"model\":{\"context_length\":1}}",
    "[{\"role\":\"user\",\"content\":\"hi\"}]",
    "{% for m in messages %}{{ m.content }}{% endfor %}",
    "\u{fffd}\u{10ffff}",
];

fn check(r: R) -> bool {
    if r.is_null() {
        return true;
    }
    let _ = message(r);
    // SAFETY: destroyed once.
    unsafe { OgaDestroyResult(r) };
    false
}

impl Program<'_, '_> {
    fn take(&mut self, kind: Kind, out: H, r: R) {
        if check(r) && !out.is_null() {
            self.live[kind as usize].push(out as usize);
        }
    }

    /// A handle argument: usually a live one of the right kind, else null, a destroyed one, a
    /// live one of another kind, or the shared model/tokenizer.
    fn handle(&mut self, kind: Kind) -> arbitrary::Result<H> {
        let choice = self.u.int_in_range(0..=15u8)?;
        let pool = match choice {
            0 => return Ok(ptr::null_mut()),
            1 | 2 => &self.stale[kind as usize],
            3 => {
                let other = self.u.choose_index(KINDS)?;
                &self.live[other]
            }
            4 if kind == Kind::Model => return Ok(SHARED.model as H),
            4 if kind == Kind::Tokenizer => return Ok(SHARED.tokenizer as H),
            _ => &self.live[kind as usize],
        };
        if pool.is_empty() {
            return Ok(match kind {
                Kind::Model => SHARED.model as H,
                Kind::Tokenizer => SHARED.tokenizer as H,
                _ => ptr::null_mut(),
            });
        }
        let i = self.u.choose_index(pool.len())?;
        Ok(pool[i] as H)
    }

    /// Removes a handle from the live list into the stale one (after it was destroyed).
    fn destroyed(&mut self, kind: Kind, h: H) {
        let live = &mut self.live[kind as usize];
        if let Some(i) = live.iter().position(|&p| p == h as usize) {
            live.swap_remove(i);
            self.stale[kind as usize].push(h as usize);
        }
    }

    /// A handle to destroy: any live one of the kind, or a stale one, or null (never the
    /// shared ones).
    fn victim(&mut self, kind: Kind) -> arbitrary::Result<H> {
        let h = match self.u.int_in_range(0..=7u8)? {
            0 => ptr::null_mut(),
            1 => {
                let pool = &self.stale[kind as usize];
                if pool.is_empty() {
                    ptr::null_mut()
                } else {
                    pool[self.u.choose_index(pool.len())?] as H
                }
            }
            _ => {
                let pool = &self.live[kind as usize];
                if pool.is_empty() {
                    ptr::null_mut()
                } else {
                    pool[self.u.choose_index(pool.len())?] as H
                }
            }
        };
        Ok(h)
    }

    /// A string argument: null, a known word, or fuzzed text (interior NULs dropped).
    fn text(&mut self) -> arbitrary::Result<Option<CString>> {
        Ok(match self.u.int_in_range(0..=9u8)? {
            0 => None,
            1..=5 => Some(CString::new(*self.u.choose(WORDS)?).expect("no NUL")),
            _ => {
                let len = self.u.int_in_range(0..=48usize)?;
                let bytes: Vec<u8> = self
                    .u
                    .bytes(len.min(self.u.len()))?
                    .iter()
                    .copied()
                    .filter(|&b| b != 0)
                    .collect();
                Some(CString::new(bytes).expect("NULs removed"))
            }
        })
    }

    fn ids(&mut self) -> arbitrary::Result<Vec<i32>> {
        let n = self.u.int_in_range(0..=12usize)?;
        (0..n)
            .map(|_| {
                if self.u.ratio(1, 8)? {
                    i32::arbitrary(self.u)
                } else {
                    self.u.int_in_range(-2..=1100)
                }
            })
            .collect()
    }

    fn number(&mut self) -> arbitrary::Result<f64> {
        const VALUES: &[f64] = &[
            0.0,
            1.0,
            -1.0,
            0.5,
            2.0,
            4.0,
            8.0,
            16.0,
            64.0,
            1e9,
            1e300,
            -1e300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        if self.u.ratio(1, 4)? {
            f64::arbitrary(self.u)
        } else {
            Ok(*self.u.choose(VALUES)?)
        }
    }

    fn out_ptr<T>(&mut self, slot: &mut T) -> arbitrary::Result<*mut T> {
        Ok(if self.u.ratio(1, 16)? {
            ptr::null_mut()
        } else {
            slot
        })
    }

    fn keep_string(&mut self, s: *const c_char) {
        if !s.is_null() {
            // SAFETY: a string returned by the library, alive until destroyed.
            let _ = unsafe { CStr::from_ptr(s) }.to_bytes().len();
            self.strings.push(s as usize);
        }
    }

    fn step(&mut self) -> arbitrary::Result<()> {
        let p = |s: &Option<CString>| s.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        let op = self.u.int_in_range(0..=52u8)?;
        // SAFETY (every call below): handle arguments are null, live, destroyed or of another
        // kind, which the C ABI checks against its registry; every other pointer is null or valid
        // for the call, as the header requires.
        unsafe {
            match op {
                0 => {
                    if self.models_made < 2 {
                        self.models_made += 1;
                        let path = match self.u.int_in_range(0..=5u8)? {
                            0 => Some(fixture("llama-int4-cpu")),
                            1 => Some(fixture("no-such-model")),
                            2 => self.text()?,
                            _ => Some(fixture("qwen2-fp32-cpu")),
                        };
                        let mut out = ptr::null_mut();
                        let slot = self.out_ptr(&mut out)?;
                        let r = OgaCreateModel(p(&path), slot);
                        self.take(Kind::Model, out, r);
                    }
                }
                1 => {
                    let h = self.victim(Kind::Model)?;
                    OgaDestroyModel(h);
                    self.destroyed(Kind::Model, h);
                }
                2 => {
                    let path = if self.u.ratio(3, 4)? {
                        Some(fixture("qwen2-fp32-cpu"))
                    } else {
                        self.text()?
                    };
                    let mut out = ptr::null_mut();
                    let slot = self.out_ptr(&mut out)?;
                    let r = OgaCreateConfig(p(&path), slot);
                    self.take(Kind::Config, out, r);
                }
                3 => {
                    let h = self.victim(Kind::Config)?;
                    OgaDestroyConfig(h);
                    self.destroyed(Kind::Config, h);
                }
                4 => {
                    let c = self.handle(Kind::Config)?;
                    check(OgaConfigClearProviders(c));
                }
                5 => {
                    let c = self.handle(Kind::Config)?;
                    let t = self.text()?;
                    check(OgaConfigAppendProvider(c, p(&t)));
                }
                6 => {
                    let c = self.handle(Kind::Config)?;
                    let (a, b, d) = (self.text()?, self.text()?, self.text()?);
                    check(OgaConfigSetProviderOption(c, p(&a), p(&b), p(&d)));
                }
                7 => {
                    let c = self.handle(Kind::Config)?;
                    let t = self.text()?;
                    check(OgaConfigOverlay(c, p(&t)));
                }
                8 => {
                    if self.models_made < 2 {
                        self.models_made += 1;
                        let c = self.handle(Kind::Config)?;
                        let mut out = ptr::null_mut();
                        let slot = self.out_ptr(&mut out)?;
                        let r = OgaCreateModelFromConfig(c, slot);
                        self.take(Kind::Model, out, r);
                    }
                }
                9 => {
                    let m = self.handle(Kind::Model)?;
                    let mut s = ptr::null();
                    let slot = self.out_ptr(&mut s)?;
                    if check(OgaModelGetType(m, slot)) {
                        self.keep_string(s);
                    }
                    let mut s = ptr::null();
                    if check(OgaModelGetDeviceType(m, &mut s)) {
                        self.keep_string(s);
                    }
                }
                10 => {
                    let m = self.handle(Kind::Model)?;
                    let mut out = ptr::null_mut();
                    let slot = self.out_ptr(&mut out)?;
                    let r = OgaCreateTokenizer(m, slot);
                    self.take(Kind::Tokenizer, out, r);
                }
                11 => {
                    let h = self.victim(Kind::Tokenizer)?;
                    OgaDestroyTokenizer(h);
                    self.destroyed(Kind::Tokenizer, h);
                }
                12 => {
                    let t = self.handle(Kind::Tokenizer)?;
                    let s = self.handle(Kind::Sequences)?;
                    let text = self.text()?;
                    check(OgaTokenizerEncode(t, p(&text), s));
                }
                13 => {
                    let t = self.handle(Kind::Tokenizer)?;
                    let ids = self.ids()?;
                    let ids_ptr = if ids.is_empty() && self.u.arbitrary()? {
                        ptr::null()
                    } else {
                        ids.as_ptr()
                    };
                    let mut s = ptr::null();
                    let slot = self.out_ptr(&mut s)?;
                    if check(OgaTokenizerDecode(t, ids_ptr, ids.len(), slot)) {
                        self.keep_string(s);
                    }
                }
                14 => {
                    let t = self.handle(Kind::Tokenizer)?;
                    let text = self.text()?;
                    let mut id = 0;
                    let slot = self.out_ptr(&mut id)?;
                    check(OgaTokenizerToTokenId(t, p(&text), slot));
                    let mut ids = ptr::null();
                    let mut n = 0;
                    if check(OgaTokenizerGetEosTokenIds(t, &mut ids, &mut n)) && n > 0 {
                        let _ = std::slice::from_raw_parts(ids, n).iter().sum::<i32>();
                    }
                    check(OgaTokenizerGetBosTokenId(t, &mut id));
                }
                15 => {
                    let t = self.handle(Kind::Tokenizer)?;
                    let (tmpl, msgs, tools) = (self.text()?, self.text()?, self.text()?);
                    let add = self.u.arbitrary()?;
                    let mut s = ptr::null();
                    let slot = self.out_ptr(&mut s)?;
                    let r =
                        OgaTokenizerApplyChatTemplate(t, p(&tmpl), p(&msgs), p(&tools), add, slot);
                    if check(r) {
                        self.keep_string(s);
                    }
                }
                16 => {
                    let t = self.handle(Kind::Tokenizer)?;
                    let texts: Vec<Option<CString>> = (0..self.u.int_in_range(0..=3usize)?)
                        .map(|_| self.text())
                        .collect::<arbitrary::Result<_>>()?;
                    let ptrs: Vec<*const c_char> = texts.iter().map(p).collect();
                    let mut out = ptr::null_mut();
                    let r = OgaTokenizerEncodeBatch(t, ptrs.as_ptr(), ptrs.len(), &mut out);
                    self.take(Kind::Tensor, out, r);
                }
                17 => {
                    let t = self.handle(Kind::Tokenizer)?;
                    let tensor = self.handle(Kind::Tensor)?;
                    let mut out = ptr::null_mut();
                    let slot = self.out_ptr(&mut out)?;
                    let r = OgaTokenizerDecodeBatch(t, tensor, slot);
                    self.take(Kind::Strings, out, r);
                }
                18 => {
                    let t = self.handle(Kind::Tokenizer)?;
                    let mut out = ptr::null_mut();
                    let slot = self.out_ptr(&mut out)?;
                    let r = OgaCreateTokenizerStream(t, slot);
                    self.take(Kind::Stream, out, r);
                }
                19 => {
                    let h = self.victim(Kind::Stream)?;
                    OgaDestroyTokenizerStream(h);
                    self.destroyed(Kind::Stream, h);
                }
                20 => {
                    let s = self.handle(Kind::Stream)?;
                    for id in self.ids()? {
                        let mut text = ptr::null();
                        // The chunk is owned by the stream: read it, do not free it.
                        if check(OgaTokenizerStreamDecode(s, id, &mut text)) && !text.is_null() {
                            let _ = CStr::from_ptr(text).to_bytes().len();
                        }
                    }
                }
                21 => {
                    let mut out = ptr::null_mut();
                    let slot = self.out_ptr(&mut out)?;
                    let r = OgaCreateSequences(slot);
                    self.take(Kind::Sequences, out, r);
                }
                22 => {
                    let h = self.victim(Kind::Sequences)?;
                    OgaDestroySequences(h);
                    self.destroyed(Kind::Sequences, h);
                }
                23 => {
                    let s = self.handle(Kind::Sequences)?;
                    let ids = self.ids()?;
                    check(OgaAppendTokenSequence(ids.as_ptr(), ids.len(), s));
                }
                24 => {
                    let s = self.handle(Kind::Sequences)?;
                    let id = self.u.int_in_range(-2..=1100)?;
                    let index = self.u.int_in_range(0..=3usize)?;
                    check(OgaAppendTokenToSequence(id, s, index));
                }
                25 => {
                    let s = self.handle(Kind::Sequences)?;
                    let count = OgaSequencesCount(s);
                    let index = self.u.int_in_range(0..=count + 1)?;
                    let n = OgaSequencesGetSequenceCount(s, index);
                    let data = OgaSequencesGetSequenceData(s, index);
                    if !data.is_null() && n > 0 {
                        let _ = std::slice::from_raw_parts(data, n).iter().sum::<i32>();
                    }
                }
                26 => {
                    let m = self.handle(Kind::Model)?;
                    let mut out = ptr::null_mut();
                    let slot = self.out_ptr(&mut out)?;
                    let r = OgaCreateGeneratorParams(m, slot);
                    self.take(Kind::Params, out, r);
                }
                27 => {
                    let h = self.victim(Kind::Params)?;
                    OgaDestroyGeneratorParams(h);
                    self.destroyed(Kind::Params, h);
                }
                28 | 29 => {
                    let params = self.handle(Kind::Params)?;
                    let name = if self.u.ratio(7, 8)? {
                        Some(CString::new(*self.u.choose(NUMBER_NAMES)?).expect("no NUL"))
                    } else {
                        self.text()?
                    };
                    let value = self.number()?;
                    check(OgaGeneratorParamsSetSearchNumber(params, p(&name), value));
                    let mut back = 0.0;
                    check(OgaGeneratorParamsGetSearchNumber(
                        params,
                        p(&name),
                        &mut back,
                    ));
                }
                30 => {
                    let params = self.handle(Kind::Params)?;
                    let name = CString::new(*self.u.choose(BOOL_NAMES)?).expect("no NUL");
                    let value = self.u.arbitrary()?;
                    check(OgaGeneratorParamsSetSearchBool(
                        params,
                        name.as_ptr(),
                        value,
                    ));
                }
                31 | 32 => {
                    let m = self.handle(Kind::Model)?;
                    let params = self.handle(Kind::Params)?;
                    let mut out = ptr::null_mut();
                    let slot = self.out_ptr(&mut out)?;
                    let r = OgaCreateGenerator(m, params, slot);
                    self.take(Kind::Generator, out, r);
                }
                33 => {
                    let h = self.victim(Kind::Generator)?;
                    OgaDestroyGenerator(h);
                    self.destroyed(Kind::Generator, h);
                }
                34 | 35 => {
                    let g = self.handle(Kind::Generator)?;
                    let ids = self.ids()?;
                    check(OgaGenerator_AppendTokens(g, ids.as_ptr(), ids.len()));
                }
                36 => {
                    let g = self.handle(Kind::Generator)?;
                    let s = self.handle(Kind::Sequences)?;
                    check(OgaGenerator_AppendTokenSequences(g, s));
                }
                37..=39 => {
                    let g = self.handle(Kind::Generator)?;
                    let n = self.u.int_in_range(1..=4usize)?;
                    for _ in 0..n {
                        if self.steps >= 24 || OgaGenerator_IsDone(g) {
                            break;
                        }
                        self.steps += 1;
                        check(OgaGenerator_GenerateNextToken(g));
                    }
                }
                40 => {
                    let g = self.handle(Kind::Generator)?;
                    let mut data = ptr::null();
                    let mut n = 0;
                    let slot = self.out_ptr(&mut data)?;
                    if check(OgaGenerator_GetNextTokens(g, slot, &mut n)) && n > 0 {
                        let _ = std::slice::from_raw_parts(data, n).iter().sum::<i32>();
                    }
                }
                41 => {
                    let g = self.handle(Kind::Generator)?;
                    let index = self.u.int_in_range(0..=2usize)?;
                    let n = OgaGenerator_GetSequenceCount(g, index);
                    let data = OgaGenerator_GetSequenceData(g, index);
                    if !data.is_null() && n > 0 {
                        let _ = std::slice::from_raw_parts(data, n).iter().sum::<i32>();
                    }
                    let _ = OgaGenerator_TokenCount(g);
                }
                42 => {
                    let g = self.handle(Kind::Generator)?;
                    let len = if self.u.ratio(1, 8)? {
                        usize::arbitrary(self.u)?
                    } else {
                        self.u.int_in_range(0..=40usize)?
                    };
                    check(OgaGenerator_RewindTo(g, len));
                }
                43 => {
                    let g = self.handle(Kind::Generator)?;
                    let (k, v) = (self.text()?, self.text()?);
                    check(OgaGenerator_SetRuntimeOption(g, p(&k), p(&v)));
                }
                44 => {
                    let g = self.handle(Kind::Generator)?;
                    let mut out = ptr::null_mut();
                    let slot = self.out_ptr(&mut out)?;
                    if self.steps < 24 {
                        self.steps += 1;
                        let r = OgaGenerator_GetLogits(g, slot);
                        self.take(Kind::Tensor, out, r);
                    }
                }
                45 => {
                    let g = self.handle(Kind::Generator)?;
                    let t = self.handle(Kind::Tensor)?;
                    check(OgaGenerator_SetLogits(g, t));
                }
                46 => {
                    let g = self.handle(Kind::Generator)?;
                    let name = self.text()?;
                    let mut out = ptr::null_mut();
                    let r = OgaGenerator_GetOutput(g, p(&name), &mut out);
                    self.take(Kind::Tensor, out, r);
                }
                47 => {
                    // A tensor over library memory (null data), of a fuzzed shape and type.
                    let rank = self.u.int_in_range(0..=4usize)?;
                    let shape: Vec<i64> = (0..rank)
                        .map(|_| {
                            if self.u.ratio(1, 6)? {
                                i64::arbitrary(self.u)
                            } else {
                                self.u.int_in_range(-1..=1200)
                            }
                        })
                        .collect::<arbitrary::Result<_>>()?;
                    let ty = self.u.int_in_range(-1..=24)?;
                    let mut out = ptr::null_mut();
                    let slot = self.out_ptr(&mut out)?;
                    let r =
                        OgaCreateTensorFromBuffer(ptr::null_mut(), shape.as_ptr(), rank, ty, slot);
                    self.take(Kind::Tensor, out, r);
                }
                48 => {
                    let h = self.victim(Kind::Tensor)?;
                    OgaDestroyTensor(h);
                    self.destroyed(Kind::Tensor, h);
                }
                49 => {
                    let t = self.handle(Kind::Tensor)?;
                    let mut ty = 0;
                    check(OgaTensorGetType(t, &mut ty));
                    let mut rank = 0;
                    if check(OgaTensorGetShapeRank(t, &mut rank)) {
                        let asked = if self.u.ratio(1, 4)? { rank + 1 } else { rank };
                        let mut dims = vec![0i64; asked];
                        check(OgaTensorGetShape(t, dims.as_mut_ptr(), asked));
                    }
                    let mut data = ptr::null_mut();
                    check(OgaTensorGetData(t, &mut data));
                }
                50 => {
                    let mut out = ptr::null_mut();
                    let r = OgaCreateStringArray(&mut out);
                    self.take(Kind::Strings, out, r);
                }
                51 => {
                    let a = self.handle(Kind::Strings)?;
                    let text = self.text()?;
                    check(OgaStringArrayAddString(a, p(&text)));
                    let mut n = 0;
                    if check(OgaStringArrayGetCount(a, &mut n)) {
                        let index = self.u.int_in_range(0..=n)?;
                        let mut s = ptr::null();
                        if check(OgaStringArrayGetString(a, index, &mut s)) && !s.is_null() {
                            let _ = CStr::from_ptr(s).to_bytes().len();
                        }
                    }
                }
                _ => {
                    // Results and strings: read or destroy a stale one (a no-op), destroy a
                    // live string, destroy a string array.
                    match self.u.int_in_range(0..=3u8)? {
                        0 => {
                            let r = self.handle(Kind::Result)?;
                            let _ = OgaResultGetError(r);
                            OgaDestroyResult(r);
                        }
                        1 if !self.strings.is_empty() => {
                            let i = self.u.choose_index(self.strings.len())?;
                            let s = self.strings.swap_remove(i);
                            OgaDestroyString(s as *const c_char);
                            // A second free is ignored.
                            OgaDestroyString(s as *const c_char);
                        }
                        _ => {
                            let h = self.victim(Kind::Strings)?;
                            OgaDestroyStringArray(h);
                            self.destroyed(Kind::Strings, h);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Destroys everything still live, in an order a careless client might use (models first).
    fn finish(&mut self) {
        // SAFETY: every pointer was made by the library; destroying in any order is allowed.
        unsafe {
            for &h in &self.live[Kind::Model as usize] {
                OgaDestroyModel(h as H);
            }
            for &h in &self.live[Kind::Config as usize] {
                OgaDestroyConfig(h as H);
            }
            for &h in &self.live[Kind::Tokenizer as usize] {
                OgaDestroyTokenizer(h as H);
            }
            for &h in &self.live[Kind::Stream as usize] {
                OgaDestroyTokenizerStream(h as H);
            }
            for &h in &self.live[Kind::Sequences as usize] {
                OgaDestroySequences(h as H);
            }
            for &h in &self.live[Kind::Generator as usize] {
                OgaDestroyGenerator(h as H);
            }
            for &h in &self.live[Kind::Params as usize] {
                OgaDestroyGeneratorParams(h as H);
            }
            for &h in &self.live[Kind::Tensor as usize] {
                OgaDestroyTensor(h as H);
            }
            for &h in &self.live[Kind::Strings as usize] {
                OgaDestroyStringArray(h as H);
            }
            for &s in &self.strings {
                OgaDestroyString(s as *const c_char);
            }
        }
    }
}

fuzz_target!(
    init: {
        // SAFETY: set once, before any other thread of this process exists.
        unsafe {
            std::env::set_var("GENAI_BRIDGE_BACKEND", "native");
            // No ONNX Runtime: the routes that need it must fail cleanly.
            std::env::set_var("ORT_DYLIB_PATH", "/nonexistent/libonnxruntime.so");
            std::env::remove_var("ORT_LIB_PATH");
            std::env::set_var("PATH", "");
        }
        let _ = &*SHARED;
    },
    |data: &[u8]| {
        let mut u = Unstructured::new(data);
        let mut program = Program {
            u: &mut u,
            live: Default::default(),
            stale: Default::default(),
            strings: Vec::new(),
            models_made: 0,
            steps: 0,
        };
        for _ in 0..64 {
            if program.u.is_empty() || program.step().is_err() {
                break;
            }
        }
        program.finish();
    }
);
