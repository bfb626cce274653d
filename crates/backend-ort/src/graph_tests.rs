//! Unit tests of the CUDA graph plan: the decision, the fixed shapes and the step values.

use super::*;

fn spec(layout: KvLayout, position_ids: bool) -> IoSpec {
    let (past, present) = match layout {
        KvLayout::Split => (
            vec!["past.0.key".into(), "past.0.value".into()],
            vec!["present.0.key".into(), "present.0.value".into()],
        ),
        KvLayout::Combined => (vec!["past_0".into()], vec!["present_0".into()]),
    };
    IoSpec {
        input_ids: ("input_ids".into(), TensorElementType::Int64),
        attention_mask: Some(("attention_mask".into(), TensorElementType::Int64)),
        position_ids: position_ids.then(|| ("position_ids".into(), TensorElementType::Int32)),
        kv_layout: layout,
        past_inputs: past,
        present_outputs: present,
        kv_dtype: TensorElementType::Float16,
        kv_heads: 2,
        head_size: 8,
        logits: "logits".into(),
        logits_dtype: TensorElementType::Float32,
        vocab_size: 32,
    }
}

fn request(io: &IoSpec) -> Request<'_> {
    Request {
        device: Device::Cuda,
        enabled: true,
        capture: true,
        batch: 1,
        max_length: 16,
        past_present_share_buffer: true,
        io,
    }
}

fn provider(options: &[(&str, &str)]) -> Provider {
    Provider {
        name: "cuda".into(),
        options: options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        device_filtering: None,
    }
}

#[test]
fn requested_reads_the_cuda_option() {
    assert!(requested(&[provider(&[("enable_cuda_graph", "1")])]));
    assert!(requested(&[provider(&[("enable_cuda_graph", "True")])]));
    assert!(!requested(&[provider(&[("enable_cuda_graph", "0")])]));
    assert!(!requested(&[provider(&[])]));
    let mut other = provider(&[("enable_cuda_graph", "1")]);
    other.name = "DML".into();
    assert!(!requested(&[other]));
}

#[test]
fn plan_has_fixed_max_length_shapes() {
    let io = spec(KvLayout::Split, true);
    let Decision::Capture(plan) = Decision::new(&request(&io)) else {
        panic!("expected the graph path");
    };
    let shapes: Vec<(&str, &[i64])> = plan
        .inputs
        .iter()
        .map(|f| (f.name.as_str(), f.shape.as_slice()))
        .collect();
    assert_eq!(
        shapes,
        [
            ("input_ids", &[1, 1][..]),
            ("attention_mask", &[1, 16][..]),
            ("position_ids", &[1, 1][..]),
        ]
    );
    assert_eq!(plan.inputs[2].dtype, TensorElementType::Int32);
    assert_eq!(plan.kv_shape, [1, 2, 16, 8]);
    assert_eq!(plan.kv_dtype, TensorElementType::Float16);
    assert_eq!(
        plan.kv[1],
        ("past.0.value".into(), "present.0.value".into())
    );
    assert_eq!(plan.logits.shape, [1, 1, 32]);
    assert_eq!(plan.logits.dtype, TensorElementType::Float32);
}

#[test]
fn every_unmet_requirement_falls_back_with_a_reason() {
    let io = spec(KvLayout::Split, false);
    let combined = spec(KvLayout::Combined, false);
    let mut no_mask = spec(KvLayout::Split, false);
    no_mask.attention_mask = None;
    let cases: Vec<(Request<'_>, &str)> = vec![
        (
            Request {
                device: Device::Cpu,
                ..request(&io)
            },
            "CUDA execution provider",
        ),
        (
            Request {
                past_present_share_buffer: false,
                ..request(&io)
            },
            "past_present_share_buffer",
        ),
        (request(&combined), "combined"),
        (request(&no_mask), "attention_mask"),
        (
            Request {
                batch: 0,
                ..request(&io)
            },
            "positive",
        ),
    ];
    for (r, why) in cases {
        match Decision::new(&r) {
            Decision::Fallback(reason) => assert!(reason.contains(why), "{reason}"),
            other => panic!("expected a fallback for {why}, got {other:?}"),
        }
    }
    let off = Decision::new(&Request {
        enabled: false,
        ..request(&io)
    });
    assert_eq!(off, Decision::Off);
    assert_eq!(off.uncaptured_run_option(), None);
    let fallback = Decision::new(&request(&combined));
    assert_eq!(fallback.uncaptured_run_option(), Some("-1"));
}

#[test]
fn a_qualifying_generation_stays_uncaptured_unless_capture_is_asked_for() {
    let io = spec(KvLayout::Split, true);
    let held = Decision::new(&Request {
        capture: false,
        ..request(&io)
    });
    match &held {
        Decision::Fallback(reason) => assert!(reason.contains(CAPTURE_ENV), "{reason}"),
        other => panic!("expected a fallback, got {other:?}"),
    }
    // Every run then carries gpu_graph_id = -1, so the EP never captures on its own.
    assert_eq!(held.uncaptured_run_option(), Some("-1"));
}

#[test]
fn plan_without_position_ids_binds_two_inputs() {
    let io = spec(KvLayout::Split, false);
    let Decision::Capture(plan) = Decision::new(&request(&io)) else {
        panic!("expected the graph path");
    };
    assert_eq!(plan.inputs.len(), 2);
}

fn plan_for(batch: usize, max_length: usize) -> Plan {
    let io = spec(KvLayout::Split, true);
    match Decision::new(&Request {
        batch,
        max_length,
        ..request(&io)
    }) {
        Decision::Capture(plan) => plan,
        other => panic!("{other:?}"),
    }
}

#[test]
fn step_values_pad_the_mask_to_max_length() {
    let plan = plan_for(2, 6);
    // Row 0 has a pad at position 1 of the prompt; row 1's new token is a pad (finished row).
    let mask = [1, 0, 1, 1, 1, 1, 1, 0];
    let input = StepInput {
        tokens: &[7, 9],
        new_len: 1,
        attention_mask: &mask,
        total_len: 4,
    };
    let mut values = StepValues::new();
    values.fill(&plan, &input).expect("fits");
    assert_eq!(values.ids, [7, 9]);
    assert_eq!(values.mask, [1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0]);
    assert_eq!(values.positions, [2, 0]);
    // The next step reuses the staging vectors and keeps their sizes.
    let mask = [1, 0, 1, 1, 1, 1, 1, 1, 0, 1];
    let input = StepInput {
        total_len: 5,
        attention_mask: &mask,
        ..input
    };
    values.fill(&plan, &input).expect("fits");
    assert_eq!(values.mask.len(), 12);
    assert_eq!(values.positions, [3, 3]);
}

#[test]
fn step_values_reject_what_does_not_fit() {
    let plan = plan_for(1, 4);
    let mut values = StepValues::new();
    let long = [1; 5];
    let too_long = StepInput {
        tokens: &[1],
        new_len: 1,
        attention_mask: &long,
        total_len: 5,
    };
    assert!(values.fill(&plan, &too_long).is_err());
    let prompt = StepInput {
        tokens: &[1, 2],
        new_len: 2,
        attention_mask: &[1, 1],
        total_len: 2,
    };
    assert!(values.fill(&plan, &prompt).is_err());
    assert_eq!(RunKind::of(&prompt), RunKind::Uncaptured);
    assert_eq!(RunKind::of(&too_long), RunKind::Captured);
}
