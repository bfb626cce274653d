//! Logits processors applied before choosing a token, in ORT GenAI's order: min_length,
//! repetition penalty, no-repeat-ngram.

use std::collections::HashSet;

/// Suppresses every EOS id while the sequence is shorter than `min_length` (total length).
pub fn apply_min_length(logits: &mut [f32], sequence_len: usize, min_length: usize, eos: &[i32]) {
    if sequence_len >= min_length {
        return;
    }
    for &id in eos {
        if let Some(l) = usize::try_from(id).ok().and_then(|i| logits.get_mut(i)) {
            *l = f32::NEG_INFINITY;
        }
    }
}

/// The Hugging Face rule over every distinct token of the sequence (prompt included):
/// negative scores are multiplied by `penalty`, others divided by it.
pub fn apply_repetition_penalty(logits: &mut [f32], sequence: &[i32], penalty: f32) {
    if penalty == 1.0 || penalty <= 0.0 {
        return;
    }
    let mut seen = HashSet::with_capacity(sequence.len());
    for &id in sequence {
        if !seen.insert(id) {
            continue;
        }
        if let Some(l) = usize::try_from(id).ok().and_then(|i| logits.get_mut(i)) {
            *l = if *l < 0.0 { *l * penalty } else { *l / penalty };
        }
    }
}

/// Bans every token that would repeat an n-gram of size `n` already in the sequence.
pub fn apply_no_repeat_ngram(logits: &mut [f32], sequence: &[i32], n: usize) {
    if n == 0 || sequence.len() + 1 < n {
        return;
    }
    let prefix = &sequence[sequence.len() + 1 - n..];
    for window in sequence.windows(n) {
        if &window[..n - 1] == prefix {
            let banned = window[n - 1];
            if let Some(l) = usize::try_from(banned).ok().and_then(|i| logits.get_mut(i)) {
                *l = f32::NEG_INFINITY;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_length_suppresses_all_eos_until_reached() {
        let mut logits = vec![1.0; 5];
        apply_min_length(&mut logits, 3, 4, &[1, 3]);
        assert_eq!(
            logits,
            [1.0, f32::NEG_INFINITY, 1.0, f32::NEG_INFINITY, 1.0]
        );
        let mut logits = vec![1.0; 5];
        apply_min_length(&mut logits, 4, 4, &[1, 3]);
        assert_eq!(logits, [1.0; 5]);
    }

    #[test]
    fn repetition_penalty_follows_the_sign_rule_once_per_token() {
        let mut logits = vec![2.0, -2.0, 3.0, 4.0];
        apply_repetition_penalty(&mut logits, &[0, 1, 0, 0], 2.0);
        assert_eq!(logits, [1.0, -4.0, 3.0, 4.0]);
    }

    #[test]
    fn no_repeat_ngram_bans_the_completion() {
        // sequence 5 6 7 5 6: the bigram prefix (6) was followed by 7; trigram prefix (5 6) too.
        let mut logits = vec![0.0; 8];
        apply_no_repeat_ngram(&mut logits, &[5, 6, 7, 5, 6], 3);
        assert_eq!(logits[7], f32::NEG_INFINITY);
        assert_eq!(logits.iter().filter(|l| l.is_infinite()).count(), 1);
        let mut logits = vec![0.0; 8];
        apply_no_repeat_ngram(&mut logits, &[5, 6], 3);
        assert!(logits.iter().all(|l| *l == 0.0));
    }
}
