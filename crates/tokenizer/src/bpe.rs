//! The runtime's BPE (onnxruntime-extensions): a vocabulary, merges ranked by their order, and the
//! merge loop, which repeatedly takes the lowest-ranked adjacent pair (leftmost first) and merges
//! every occurrence of that pair from there on in one pass.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value as Json;

#[derive(Debug)]
pub(crate) struct Bpe {
    pub vocab: HashMap<String, u32>,
    /// (left, right) -> (rank, merged id)
    merges: HashMap<(u32, u32), (u32, u32)>,
    pub unk: Option<u32>,
}

impl Bpe {
    /// The BPE model of tokenizer.json.
    pub fn from_json(json: &Json) -> Result<Self, String> {
        let model = &json["model"];
        let vocab: HashMap<String, u32> = model["vocab"]
            .as_object()
            .ok_or("model.vocab is not an object")?
            .iter()
            .map(|(token, id)| {
                let id = id.as_u64().and_then(|id| u32::try_from(id).ok());
                id.map(|id| (token.clone(), id))
                    .ok_or(format!("bad id for {token:?}"))
            })
            .collect::<Result<_, _>>()?;
        let pairs = model["merges"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| match m {
                Json::String(s) => s.split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned())),
                Json::Array(p) => Some((
                    p.first()?.as_str()?.to_owned(),
                    p.get(1)?.as_str()?.to_owned(),
                )),
                _ => None,
            });
        let mut merges = HashMap::new();
        for (rank, (left, right)) in pairs.enumerate() {
            let id = |s: &str| vocab.get(s).copied();
            let merged = id(&format!("{left}{right}"));
            if let (Some(l), Some(r), Some(m), Ok(rank)) =
                (id(&left), id(&right), merged, rank.try_into())
            {
                merges.insert((l, r), (rank, m));
            }
        }
        let unk = model["unk_token"]
            .as_str()
            .and_then(|u| vocab.get(u).copied());
        Ok(Self { vocab, merges, unk })
    }

    /// Applies the merges to a list of token ids. Same result as the runtime's loop, in
    /// O(n log n): pending pairs sit in an ordered set by (rank, position); a pass takes every
    /// pair of the lowest rank in position order, skipping those that merges have since changed.
    pub fn merge(&self, mut tokens: Vec<u32>) -> Vec<u32> {
        const NONE: usize = usize::MAX;
        let n = tokens.len();
        let mut next: Vec<usize> = (1..=n).map(|j| if j < n { j } else { NONE }).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.checked_sub(1).unwrap_or(NONE)).collect();
        let mut alive = vec![true; n];
        let pair_at = |tokens: &[u32], next: &[usize], i: usize| {
            let j = *next.get(i)?;
            self.merges.get(&(tokens[i], *tokens.get(j)?)).copied()
        };
        let mut queue = BTreeSet::new();
        for i in 0..n {
            if let Some((rank, _)) = pair_at(&tokens, &next, i) {
                queue.insert((rank, i));
            }
        }
        while let Some(&(rank, first)) = queue.first() {
            let mut cursor = first;
            while let Some(&(r, i)) = queue.range((rank, cursor)..).next().filter(|e| e.0 == rank) {
                queue.remove(&(r, i));
                cursor = i + 1;
                let Some((now, merged)) = pair_at(&tokens, &next, i).filter(|_| alive[i]) else {
                    continue;
                };
                if now != rank {
                    continue;
                }
                let j = next[i];
                tokens[i] = merged;
                alive[j] = false;
                next[i] = next[j];
                if let Some(p) = prev.get_mut(next[j]) {
                    *p = i;
                }
                for k in [prev[i], i] {
                    if let Some((r, _)) = pair_at(&tokens, &next, k) {
                        queue.insert((r, k));
                    }
                }
            }
        }
        tokens
            .into_iter()
            .zip(alive)
            .filter_map(|(t, a)| a.then_some(t))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime's loop, literally: find the lowest-ranked pair (leftmost), merge that pair
    /// everywhere from there on, repeat.
    fn naive(bpe: &Bpe, mut symbols: Vec<u32>) -> Vec<u32> {
        loop {
            let best = (0..symbols.len().saturating_sub(1))
                .filter_map(|i| {
                    bpe.merges
                        .get(&(symbols[i], symbols[i + 1]))
                        .map(|&(r, _)| (r, i))
                })
                .min();
            let Some((_, start)) = best else {
                return symbols;
            };
            let pair = (symbols[start], symbols[start + 1]);
            let merged = bpe.merges[&pair].1;
            let (mut out, mut i) = (symbols[..start].to_vec(), start);
            while i < symbols.len() {
                if i + 1 < symbols.len() && (symbols[i], symbols[i + 1]) == pair {
                    out.push(merged);
                    i += 2;
                } else {
                    out.push(symbols[i]);
                    i += 1;
                }
            }
            symbols = out;
        }
    }

    #[test]
    fn fast_merge_equals_the_runtime_loop() {
        // Tokens 0..4 are letters; merges in a scrambled rank order, some making tokens that
        // merge again, some of equal parts ("aa").
        let mut merges = HashMap::new();
        let mut next_id = 4;
        let mut seed = 7u64;
        let mut rand = |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for rank in 0..40u32 {
            let (a, b) = (rand(u64::from(next_id)), rand(u64::from(next_id)));
            let pair = (u32::try_from(a).unwrap(), u32::try_from(b).unwrap());
            merges.entry(pair).or_insert_with(|| {
                next_id += 1;
                (rank, next_id - 1)
            });
        }
        let bpe = Bpe {
            vocab: HashMap::new(),
            merges,
            unk: None,
        };
        for len in 0..200 {
            let symbols: Vec<u32> = (0..len % 60)
                .map(|_| u32::try_from(rand(4)).unwrap())
                .collect();
            assert_eq!(
                bpe.merge(symbols.clone()),
                naive(&bpe, symbols.clone()),
                "{symbols:?}"
            );
        }
    }
}
