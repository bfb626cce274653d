//! What the lifter knows before it reads the graph: the config's sizes and graph interface names,
//! and a memo of the attention-mask values already verified.

use std::cell::RefCell;
use std::collections::HashSet;

use genai_config::{Config, DecoderInputs, DecoderOutputs};

/// The config's view of the decoder.
pub(crate) struct Cx<'c> {
    pub hidden: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head: usize,
    pub vocab: usize,
    pub layers: usize,
    pub context_length: usize,
    pub inputs: &'c DecoderInputs,
    pub outputs: &'c DecoderOutputs,
    /// Mask-derived values (`seqlens_k`, `total_sequence_length`) already checked.
    pub checked: RefCell<HashSet<String>>,
}

impl<'c> Cx<'c> {
    pub(crate) fn new(config: &'c Config) -> Self {
        let d = &config.model.decoder;
        Cx {
            hidden: d.hidden_size,
            heads: d.num_attention_heads,
            kv_heads: d.num_key_value_heads,
            head: d.head_size,
            vocab: config.model.vocab_size,
            layers: d.num_hidden_layers,
            context_length: config.model.context_length,
            inputs: &d.inputs,
            outputs: &d.outputs,
            checked: RefCell::new(HashSet::new()),
        }
    }

    /// Width of all query heads.
    pub(crate) fn q_width(&self) -> usize {
        self.heads.saturating_mul(self.head)
    }

    /// Width of all key (or value) heads.
    pub(crate) fn kv_width(&self) -> usize {
        self.kv_heads.saturating_mul(self.head)
    }
}
