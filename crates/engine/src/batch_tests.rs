//! Tests of the host choice from a spec (the generator's rule, checked against the generator on
//! real models in crates/cli/tests/native_batch.rs).

use super::*;

#[test]
fn the_host_choice_suppresses_then_penalises_then_takes_the_argmax() {
    let mut logits = vec![0.0f32, 3.0, 1.0];
    let spec = SamplingSpec {
        choice: Choice::Greedy,
        penalty: 2.0,
        penalized: &[1],
        suppressed: &[2],
        no_repeat_ngram: 0,
    };
    assert_eq!(
        choose_on_host(&mut logits, &spec, &mut Vec::new()).unwrap(),
        1
    );
    assert_eq!(logits, vec![0.0, 1.5, f32::NEG_INFINITY]);
}

#[test]
fn a_spec_with_an_ngram_ban_is_refused_and_the_logits_are_left_alone() {
    let mut logits = vec![0.0f32, 3.0, 1.0];
    let spec = SamplingSpec {
        choice: Choice::Greedy,
        penalty: 2.0,
        penalized: &[1],
        suppressed: &[2],
        no_repeat_ngram: 2,
    };
    assert!(choose_on_host(&mut logits, &spec, &mut Vec::new()).is_err());
    assert_eq!(logits, vec![0.0, 3.0, 1.0]);
}
