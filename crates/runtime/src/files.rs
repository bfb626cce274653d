//! Reading a model folder's files: genai_config.json, the decoder graph and the tokenizer, each
//! error naming the file.

use crate::Error;
use genai_config::Config;
use genai_onnx::OnnxModel;
use genai_tokenizer::{SpecialTokens, Tokenizer};
use std::path::Path;

/// Loads `dir/genai_config.json`.
pub fn load_config(dir: &Path) -> Result<Config, Error> {
    Config::load(dir).map_err(|error| Error::Config {
        path: dir.join(genai_config::CONFIG_FILE).display().to_string(),
        error,
    })
}

/// Loads the decoder graph the config names.
pub fn load_graph(config: &Config) -> Result<OnnxModel, Error> {
    let path = config.decoder_path();
    OnnxModel::load(&path).map_err(|error| Error::Onnx {
        path: path.display().to_string(),
        error,
    })
}

/// The model's tokenizer: the files in `model.tokenizer_dir` (else the model folder), with the
/// special token ids genai_config.json gives.
pub fn load_tokenizer(config: &Config) -> Result<Tokenizer, genai_tokenizer::Error> {
    let model = &config.model;
    let special = SpecialTokens {
        bos: model.bos_token_id,
        eos: model.eos_token_ids.clone(),
        pad: model.pad_token_id,
    };
    Tokenizer::from_dir(&config.tokenizer_dir(), special)
}
