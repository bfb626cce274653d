//! `OgaTokenizer`: encode, decode (single and batched), special token ids and chat templates,
//! with the official runtime's rules.

use crate::OgaResult;
use crate::config::{OgaConfig, load_config};
use crate::ffi::{
    Error, Handle, Result, borrow, check_out, destroy, guard, into_c_string, into_handle,
    read_optional_str, read_slice, read_str, write_out,
};
use crate::model::OgaModel;
use crate::sequences::OgaSequences;
use crate::strings::OgaStringArray;
use crate::tensor::{ElementType, OgaTensor};
use genai_config::Config;
use genai_runtime::load_tokenizer;
use genai_tokenizer::Tokenizer;
use std::ffi::c_char;
use std::sync::Arc;

/// A tokenizer. Thread-safety: every function takes it by shared reference; it may be used
/// from any number of threads at once.
pub struct OgaTokenizer {
    pub(crate) tokenizer: Arc<Tokenizer>,
    bos: i32,
    eos: Vec<i32>,
    pad: i32,
    /// Tool-call and reasoning tags: bot, eot, bor, eor.
    tags: [Option<i32>; 4],
}

impl Handle for OgaTokenizer {
    const KIND: &'static str = "OgaTokenizer";
}

/// The official runtime's built-in tool-call/reasoning ids for model types whose config does
/// not name them: (type, [bot, eot, bor, eor]).
const TAG_FALLBACKS: &[(&str, [Option<i32>; 4])] = &[
    ("qwen2", [Some(151657), Some(151658), None, None]),
    (
        "qwen3",
        [Some(151657), Some(151658), Some(151667), Some(151668)],
    ),
    ("phi3", [Some(200025), Some(200026), None, None]),
];

impl OgaTokenizer {
    fn new(tokenizer: Arc<Tokenizer>, config: &Config) -> Self {
        let model = &config.model;
        let ids = &model.tool_and_reasoning_ids;
        let configured = [ids.bot, ids.eot, ids.bor, ids.eor];
        let fallback = TAG_FALLBACKS
            .iter()
            .find(|(ty, _)| *ty == model.model_type)
            .map_or([None; 4], |(_, ids)| *ids);
        let mut tags = configured;
        for (tag, default) in tags.iter_mut().zip(fallback) {
            *tag = tag.or(default);
        }
        OgaTokenizer {
            tokenizer,
            bos: model.bos_token_id.unwrap_or(0),
            eos: model.eos_token_ids.clone(),
            pad: model.pad_token_id,
            tags,
        }
    }
}

fn create(
    out: *mut *mut OgaTokenizer,
    tokenizer: OgaTokenizer,
    function: &'static str,
) -> Result<()> {
    let handle = into_handle(tokenizer);
    // SAFETY: callers checked `out` is non-null; it points to storage for one pointer.
    unsafe { write_out(out, handle, function, "out") }
}

/// `OgaResult* OgaCreateTokenizer(const OgaModel*, OgaTokenizer** out)`.
///
/// # Safety
/// `model` is null or a live model; `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaCreateTokenizer(
    model: *const OgaModel,
    out: *mut *mut OgaTokenizer,
) -> *mut OgaResult {
    const F: &str = "OgaCreateTokenizer";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let model = unsafe { borrow(model, F, "model") }?;
        let tokenizer = model.session.tokenizer()?;
        create(out, OgaTokenizer::new(tokenizer, model.session.config()), F)
    })
}

/// `OgaResult* OgaCreateTokenizerFromConfig(const OgaConfig*, OgaTokenizer** out)`.
///
/// # Safety
/// `config` is null or a live config; `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaCreateTokenizerFromConfig(
    config: *const OgaConfig,
    out: *mut *mut OgaTokenizer,
) -> *mut OgaResult {
    const F: &str = "OgaCreateTokenizerFromConfig";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let config = unsafe { borrow(config, F, "config") }?.snapshot();
        let tokenizer = Arc::new(load_tokenizer(&config)?);
        create(out, OgaTokenizer::new(tokenizer, &config), F)
    })
}

/// `OgaResult* OgaCreateTokenizerFromPath(const char* config_path, OgaTokenizer** out)`.
///
/// # Safety
/// `config_path` is a NUL-terminated string; `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaCreateTokenizerFromPath(
    config_path: *const c_char,
    out: *mut *mut OgaTokenizer,
) -> *mut OgaResult {
    const F: &str = "OgaCreateTokenizerFromPath";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: C contract.
        let dir = unsafe { read_str(config_path, F, "config_path") }?;
        let config = load_config(dir)?;
        let tokenizer = Arc::new(load_tokenizer(&config)?);
        create(out, OgaTokenizer::new(tokenizer, &config), F)
    })
}

/// `void OgaDestroyTokenizer(OgaTokenizer*)`.
///
/// # Safety
/// `tokenizer` is null or a live tokenizer no other thread is using.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaDestroyTokenizer(tokenizer: *mut OgaTokenizer) {
    // SAFETY: checked against the registry inside.
    unsafe { destroy(tokenizer) }
}

/// Writes one id of the tokenizer.
///
/// # Safety
/// `tokenizer` is null or live; `out` points to writable storage for an int32.
unsafe fn id_getter(
    function: &'static str,
    tokenizer: *const OgaTokenizer,
    out: *mut i32,
    pick: impl FnOnce(&OgaTokenizer) -> Result<i32>,
) -> *mut OgaResult {
    guard(function, || {
        check_out(out, function, "token_id")?;
        // SAFETY: checked against the registry.
        let tokenizer = unsafe { borrow(tokenizer, function, "tokenizer") }?;
        let id = pick(tokenizer)?;
        // SAFETY: checked non-null.
        unsafe { write_out(out, id, function, "token_id") }
    })
}

fn tag(tokenizer: &OgaTokenizer, index: usize, name: &str) -> Result<i32> {
    tokenizer.tags[index]
        .ok_or_else(|| Error::Invalid(format!("{name} is not defined for this model")))
}

/// `bos_token_id` of genai_config.json.
///
/// # Safety
/// `tokenizer` is null or live; `token_id` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTokenizerGetBosTokenId(
    tokenizer: *const OgaTokenizer,
    token_id: *mut i32,
) -> *mut OgaResult {
    // SAFETY: forwarded contract.
    unsafe {
        id_getter("OgaTokenizerGetBosTokenId", tokenizer, token_id, |t| {
            Ok(t.bos)
        })
    }
}

/// `pad_token_id` of genai_config.json.
///
/// # Safety
/// `tokenizer` is null or live; `token_id` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTokenizerGetPadTokenId(
    tokenizer: *const OgaTokenizer,
    token_id: *mut i32,
) -> *mut OgaResult {
    // SAFETY: forwarded contract.
    unsafe {
        id_getter("OgaTokenizerGetPadTokenId", tokenizer, token_id, |t| {
            Ok(t.pad)
        })
    }
}

/// Tool-call start id.
///
/// # Safety
/// `tokenizer` is null or live; `token_id` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTokenizerGetBotTokenId(
    tokenizer: *const OgaTokenizer,
    token_id: *mut i32,
) -> *mut OgaResult {
    // SAFETY: forwarded contract.
    unsafe {
        id_getter("OgaTokenizerGetBotTokenId", tokenizer, token_id, |t| {
            tag(t, 0, "bot_token_id")
        })
    }
}

/// Tool-call end id.
///
/// # Safety
/// `tokenizer` is null or live; `token_id` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTokenizerGetEotTokenId(
    tokenizer: *const OgaTokenizer,
    token_id: *mut i32,
) -> *mut OgaResult {
    // SAFETY: forwarded contract.
    unsafe {
        id_getter("OgaTokenizerGetEotTokenId", tokenizer, token_id, |t| {
            tag(t, 1, "eot_token_id")
        })
    }
}

/// Reasoning start id.
///
/// # Safety
/// `tokenizer` is null or live; `token_id` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTokenizerGetBorTokenId(
    tokenizer: *const OgaTokenizer,
    token_id: *mut i32,
) -> *mut OgaResult {
    // SAFETY: forwarded contract.
    unsafe {
        id_getter("OgaTokenizerGetBorTokenId", tokenizer, token_id, |t| {
            tag(t, 2, "bor_token_id")
        })
    }
}

/// Reasoning end id.
///
/// # Safety
/// `tokenizer` is null or live; `token_id` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTokenizerGetEorTokenId(
    tokenizer: *const OgaTokenizer,
    token_id: *mut i32,
) -> *mut OgaResult {
    // SAFETY: forwarded contract.
    unsafe {
        id_getter("OgaTokenizerGetEorTokenId", tokenizer, token_id, |t| {
            tag(t, 3, "eor_token_id")
        })
    }
}

/// `OgaResult* OgaTokenizerGetEosTokenIds(const OgaTokenizer*, const int32_t** eos_token_ids,
/// size_t* token_count)`: the ids stay owned by the tokenizer.
///
/// # Safety
/// `tokenizer` is null or live; the out pointers point to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTokenizerGetEosTokenIds(
    tokenizer: *const OgaTokenizer,
    eos_token_ids: *mut *const i32,
    token_count: *mut usize,
) -> *mut OgaResult {
    const F: &str = "OgaTokenizerGetEosTokenIds";
    guard(F, || {
        check_out(eos_token_ids, F, "eos_token_ids")?;
        check_out(token_count, F, "token_count")?;
        // SAFETY: checked against the registry.
        let tokenizer = unsafe { borrow(tokenizer, F, "tokenizer") }?;
        // SAFETY: both checked non-null.
        unsafe {
            write_out(eos_token_ids, tokenizer.eos.as_ptr(), F, "eos_token_ids")?;
            write_out(token_count, tokenizer.eos.len(), F, "token_count")
        }
    })
}

/// `OgaResult* OgaTokenizerEncode(const OgaTokenizer*, const char* str, OgaSequences*)`: appends
/// the ids of `str` as a new sequence.
///
/// # Safety
/// `tokenizer` and `sequences` are null or live; `str` is NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTokenizerEncode(
    tokenizer: *const OgaTokenizer,
    str: *const c_char,
    sequences: *mut OgaSequences,
) -> *mut OgaResult {
    const F: &str = "OgaTokenizerEncode";
    guard(F, || {
        // SAFETY: checked against the registry.
        let tokenizer = unsafe { borrow(tokenizer, F, "tokenizer") }?;
        // SAFETY: checked against the registry.
        let sequences = unsafe { borrow(sequences, F, "sequences") }?;
        // SAFETY: C contract.
        let text = unsafe { read_str(str, F, "str") }?;
        let ids = tokenizer.tokenizer.encode(text)?;
        sequences.push(ids);
        Ok(())
    })
}

/// `OgaResult* OgaTokenizerEncodeBatch(const OgaTokenizer*, const char** strings, size_t count,
/// OgaTensor** out)`: an int32 tensor `[count, longest]`, padded on the right.
///
/// # Safety
/// `tokenizer` is null or live; `strings` holds `count` NUL-terminated strings; `out` points to
/// writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTokenizerEncodeBatch(
    tokenizer: *const OgaTokenizer,
    strings: *const *const c_char,
    count: usize,
    out: *mut *mut OgaTensor,
) -> *mut OgaResult {
    const F: &str = "OgaTokenizerEncodeBatch";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let tokenizer = unsafe { borrow(tokenizer, F, "tokenizer") }?;
        // SAFETY: C contract: `count` pointers.
        let pointers = unsafe { read_slice(strings, count, F, "strings") }?;
        let texts = pointers
            .iter()
            // SAFETY: C contract: each is NUL-terminated.
            .map(|&p| unsafe { read_str(p, F, "strings[i]") })
            .collect::<Result<Vec<_>>>()?;
        let rows = tokenizer.tokenizer.encode_batch(&texts)?;
        let width = rows.first().map_or(0, Vec::len);
        let flat: Vec<i32> = rows.into_iter().flatten().collect();
        let tensor = OgaTensor::from_values(&flat, &[count, width], ElementType::INT32)?;
        // SAFETY: checked non-null.
        unsafe { write_out(out, into_handle(tensor), F, "out") }
    })
}

/// `OgaResult* OgaTokenizerDecode(const OgaTokenizer*, const int32_t* tokens, size_t
/// token_count, const char** out_string)`: the caller frees the text with `OgaDestroyString`.
///
/// # Safety
/// `tokenizer` is null or live; `tokens` holds `token_count` ids; `out_string` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTokenizerDecode(
    tokenizer: *const OgaTokenizer,
    tokens: *const i32,
    token_count: usize,
    out_string: *mut *const c_char,
) -> *mut OgaResult {
    const F: &str = "OgaTokenizerDecode";
    guard(F, || {
        check_out(out_string, F, "out_string")?;
        // SAFETY: checked against the registry.
        let tokenizer = unsafe { borrow(tokenizer, F, "tokenizer") }?;
        // SAFETY: C contract.
        let ids = unsafe { read_slice(tokens, token_count, F, "tokens") }?;
        let text = tokenizer.tokenizer.decode(ids)?;
        // SAFETY: checked non-null.
        unsafe { write_out(out_string, into_c_string(text), F, "out_string") }
    })
}

/// `OgaResult* OgaTokenizerDecodeBatch(const OgaTokenizer*, const OgaTensor* tensor,
/// OgaStringArray** out)`: decodes each row of a 2-D int32 tensor.
///
/// # Safety
/// `tokenizer` and `tensor` are null or live; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTokenizerDecodeBatch(
    tokenizer: *const OgaTokenizer,
    tensor: *const OgaTensor,
    out: *mut *mut OgaStringArray,
) -> *mut OgaResult {
    const F: &str = "OgaTokenizerDecodeBatch";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let tokenizer = unsafe { borrow(tokenizer, F, "tokenizer") }?;
        // SAFETY: checked against the registry.
        let tensor = unsafe { borrow(tensor, F, "tensor") }?;
        let (rows, width) = tensor.matrix_shape(F)?;
        let ids = tensor.to_i32_vec(F)?;
        let mut texts = Vec::with_capacity(rows);
        for row in ids.chunks(width.max(1)).take(rows) {
            texts.push(tokenizer.tokenizer.decode(row)?);
        }
        let array = OgaStringArray::from_strings(texts);
        // SAFETY: checked non-null.
        unsafe { write_out(out, into_handle(array), F, "out") }
    })
}

/// `OgaResult* OgaTokenizerToTokenId(const OgaTokenizer*, const char* str, int32_t* token_id)`:
/// -1 when `str` is not a token.
///
/// # Safety
/// `tokenizer` is null or live; `str` is NUL-terminated; `token_id` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTokenizerToTokenId(
    tokenizer: *const OgaTokenizer,
    str: *const c_char,
    token_id: *mut i32,
) -> *mut OgaResult {
    const F: &str = "OgaTokenizerToTokenId";
    // SAFETY: forwarded contract.
    unsafe {
        id_getter(F, tokenizer, token_id, |t| {
            let text = read_str(str, F, "str")?;
            // As in the official runtime, a string that is not a token is -1.
            Ok(t.tokenizer.token_to_id(text).unwrap_or(-1))
        })
    }
}

/// `OgaResult* OgaTokenizerApplyChatTemplate(const OgaTokenizer*, const char* template_str,
/// const char* messages, const char* tools, bool add_generation_prompt, const char** out)`.
///
/// # Safety
/// `tokenizer` is null or live; the strings are null or NUL-terminated; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTokenizerApplyChatTemplate(
    tokenizer: *const OgaTokenizer,
    template_str: *const c_char,
    messages: *const c_char,
    tools: *const c_char,
    add_generation_prompt: bool,
    out_string: *mut *const c_char,
) -> *mut OgaResult {
    const F: &str = "OgaTokenizerApplyChatTemplate";
    guard(F, || {
        check_out(out_string, F, "out_string")?;
        // SAFETY: checked against the registry.
        let tokenizer = unsafe { borrow(tokenizer, F, "tokenizer") }?;
        // SAFETY: C contract for the three strings.
        let (template, messages, tools) = unsafe {
            (
                read_optional_str(template_str, F, "template_str")?,
                read_str(messages, F, "messages")?,
                read_optional_str(tools, F, "tools")?,
            )
        };
        let text = tokenizer.tokenizer.apply_chat_template(
            template,
            messages,
            tools,
            add_generation_prompt,
        )?;
        // SAFETY: checked non-null.
        unsafe { write_out(out_string, into_c_string(text), F, "out_string") }
    })
}

/// `OgaResult* OgaUpdateTokenizerOptions(OgaTokenizer*, const char* const* keys, const char*
/// const* values, size_t num_options)`: genai-bridge's tokenizer has its defaults fixed
/// (`add_special_tokens` false, `skip_special_tokens` true); setting those values is accepted,
/// anything else is an error.
///
/// # Safety
/// `tokenizer` is null or live; `keys` and `values` hold `num_options` NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaUpdateTokenizerOptions(
    tokenizer: *mut OgaTokenizer,
    keys: *const *const c_char,
    values: *const *const c_char,
    num_options: usize,
) -> *mut OgaResult {
    const F: &str = "OgaUpdateTokenizerOptions";
    guard(F, || {
        // SAFETY: checked against the registry.
        unsafe { borrow(tokenizer.cast_const(), F, "tokenizer") }?;
        // SAFETY: C contract.
        let keys = unsafe { read_slice(keys, num_options, F, "keys") }?;
        // SAFETY: C contract.
        let values = unsafe { read_slice(values, num_options, F, "values") }?;
        for (&key, &value) in keys.iter().zip(values) {
            // SAFETY: C contract: NUL-terminated strings.
            let (key, value) = unsafe {
                (
                    read_str(key, F, "keys[i]")?,
                    read_str(value, F, "values[i]")?,
                )
            };
            let fixed = match key {
                "add_special_tokens" => "false",
                "skip_special_tokens" => "true",
                _ => "",
            };
            let wanted = value.to_ascii_lowercase();
            let wanted = match wanted.as_str() {
                "1" => "true",
                "0" => "false",
                other => other,
            };
            if fixed.is_empty() || wanted != fixed {
                return Err(Error::Unsupported {
                    function: F,
                    why: "only add_special_tokens=false and skip_special_tokens=true are supported",
                });
            }
        }
        Ok(())
    })
}
