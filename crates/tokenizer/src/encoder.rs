//! The runtime's encoder for BPE models: added tokens are split out first (longest match, see
//! [`AddedTokens`]), then the text between them goes to the SentencePiece-style or byte-level
//! rules.

use serde_json::Value as Json;

use crate::bpe::Bpe;
use crate::bytelevel::ByteLevelEncoder;
use crate::model::{AddedTokens, Kind};
use crate::pretok::Classifier;
use crate::spm::SpmEncoder;

#[derive(Debug)]
enum Rules {
    SentencePiece(SpmEncoder),
    ByteLevel(ByteLevelEncoder),
}

#[derive(Debug)]
pub(crate) struct Encoder {
    added: AddedTokens,
    classifier: Classifier,
    rules: Rules,
}

impl Encoder {
    /// The encoder for a tokenizer of this kind; Ok(None) where the `tokenizers` library is
    /// used instead (models other than BPE, pre-tokenizer patterns this crate does not reproduce).
    pub fn new(json: &Json, kind: &Kind, model_name: &str) -> Result<Option<Self>, String> {
        let rules = match kind {
            Kind::Other => return Ok(None),
            _ if model_name == "CLIP" => return Ok(None),
            Kind::SentencePiece {
                dummy_prefix,
                whole_pieces,
            } => {
                let bpe = Bpe::from_json(json)?;
                Rules::SentencePiece(SpmEncoder::new(bpe, *dummy_prefix, *whole_pieces))
            }
            Kind::ByteLevel { .. } => {
                let bpe = Bpe::from_json(json)?;
                match ByteLevelEncoder::new(json, bpe, model_name) {
                    Some(encoder) => Rules::ByteLevel(encoder),
                    None => return Ok(None),
                }
            }
        };
        let added = AddedTokens::from_json(json);
        Ok(Some(Self {
            added,
            classifier: Classifier::new(),
            rules,
        }))
    }

    /// Token ids of `text`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        for piece in self.added.split(text) {
            match (piece, &self.rules) {
                (Ok(id), _) => out.push(id),
                (Err(text), Rules::SentencePiece(spm)) => {
                    spm.encode_text(&self.classifier, text, &mut out)
                }
                (Err(text), Rules::ByteLevel(bbpe)) => {
                    bbpe.encode_text(&self.classifier, text, &mut out)
                }
            }
        }
        out
    }
}
