//! Many sequences per step on the native CPU decoder: on every fixture and the conformance
//! model, each sequence of a ragged batch (prompt chunks and decode rows of different sequences
//! sharing steps, 1 to 64 sequences of mixed lengths) gets the logits it gets alone, and each
//! row of a padded generator batch the tokens it gets alone. The CPU kernels give a row the same
//! bits alone or in a batch, so logits are compared for bitwise equality (the bound is
//! 1e-5).

mod common;

use common::*;
use genai_backend_native::{CpuDecoder, CpuOptions};
use genai_config::Config;
use genai_engine::batch::{BatchBackend, BatchOptions, Chunk, LogitsWanted, SeqId};
use genai_engine::{Decoder, Generator, argmax};
use genai_onnx::OnnxModel;
use std::path::Path;

fn load(dir: &Path) -> (Config, CpuDecoder) {
    let config = Config::load(dir).expect("config");
    let model = OnnxModel::load(&config.decoder_path()).expect("model");
    let plan =
        genai_frontend::lift(&model, &config).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let decoder = CpuDecoder::load(
        &model,
        &plan,
        &CpuOptions {
            threads: Some(2),
            ..CpuOptions::default()
        },
    )
    .expect("native");
    (config, decoder)
}

/// The model folder's name, for messages.
fn model_name(dir: &Path) -> String {
    dir.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .to_string()
}

/// A batch state of `kv_positions` positions for sequences of at most `max` positions.
fn batch_state(decoder: &CpuDecoder, kv_positions: usize, max: usize) -> Box<dyn BatchBackend> {
    decoder
        .start_batch(&BatchOptions {
            kv_positions,
            max_sequence: max,
        })
        .expect("state")
}

/// A prompt of `len` tokens for sequence `i`.
fn prompt(i: usize, len: usize, vocab: i32) -> Vec<i32> {
    (0..len)
        .map(|t| ((i * 31 + t * 7 + 3) as i32) % vocab)
        .collect()
}

/// Greedy decoding of `prompt` alone for `steps` tokens: the logits of the prompt's last
/// position and of every decode step.
fn alone(decoder: &CpuDecoder, prompt: &[i32], steps: usize, max: usize) -> Vec<Vec<f32>> {
    let mut state = batch_state(decoder, max, max);
    let seq = state.add_sequence();
    let mut out = Vec::new();
    let mut tokens = prompt.to_vec();
    for _ in 0..=steps {
        let logits = state
            .step(&[Chunk {
                seq,
                tokens: &tokens,
                logits: LogitsWanted::Last,
            }])
            .expect("step alone");
        tokens = vec![argmax(&logits) as i32];
        out.push(logits);
    }
    out
}

/// One sequence of the ragged run: its prompt, where it is, and the logits it got.
struct Running {
    seq: SeqId,
    prompt: Vec<i32>,
    fed: usize,
    next: Option<i32>,
    logits: Vec<Vec<f32>>,
}

/// All sequences in one state: sequence `i` joins at step `i % 3`, feeds its prompt in chunks of
/// `chunk` tokens, then decodes greedily, every sequence in the same steps as the others.
fn ragged(
    state: &mut dyn BatchBackend,
    prompts: &[Vec<i32>],
    steps: usize,
    chunk: usize,
    vocab: usize,
) -> Vec<Vec<Vec<f32>>> {
    let mut runs: Vec<Running> = prompts
        .iter()
        .map(|p| Running {
            seq: state.add_sequence(),
            prompt: p.clone(),
            fed: 0,
            next: None,
            logits: Vec::new(),
        })
        .collect();
    let mut step = 0;
    while runs.iter().any(|r| r.logits.len() <= steps) {
        let mut work: Vec<(usize, Vec<i32>, LogitsWanted)> = Vec::new();
        for (i, r) in runs.iter().enumerate() {
            if i % 3 > step || r.logits.len() > steps {
                continue;
            }
            if r.fed < r.prompt.len() {
                let end = (r.fed + chunk).min(r.prompt.len());
                let wanted = if end == r.prompt.len() {
                    LogitsWanted::Last
                } else {
                    LogitsWanted::None
                };
                work.push((i, r.prompt[r.fed..end].to_vec(), wanted));
            } else if let Some(t) = r.next {
                work.push((i, vec![t], LogitsWanted::Last));
            }
        }
        let chunks: Vec<Chunk<'_>> = work
            .iter()
            .map(|(i, tokens, logits)| Chunk {
                seq: runs[*i].seq,
                tokens,
                logits: *logits,
            })
            .collect();
        let out = state.step(&chunks).expect("ragged step");
        let mut at = 0;
        for (i, tokens, wanted) in &work {
            let r = &mut runs[*i];
            if r.fed < r.prompt.len() {
                r.fed += tokens.len();
            }
            if *wanted == LogitsWanted::Last {
                let logits = out[at..at + vocab].to_vec();
                at += vocab;
                r.next = Some(argmax(&logits) as i32);
                r.logits.push(logits);
            }
        }
        assert_eq!(at, out.len(), "every logits row is accounted for");
        step += 1;
    }
    runs.into_iter().map(|r| r.logits).collect()
}

fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            if x.to_bits() == y.to_bits() {
                0.0
            } else {
                (x - y).abs()
            }
        })
        .fold(0.0, f32::max)
}

#[test]
fn each_sequence_of_a_ragged_batch_gets_what_it_gets_alone() {
    let steps = 6;
    for dir in native_cpu_models() {
        let (config, decoder) = load(&dir);
        let vocab = decoder.vocab_size();
        let v = vocab.min(512) as i32;
        let name = model_name(&dir);
        for (n, chunk) in [(1, 64), (3, 2), (8, 5), (64, 3)] {
            // Mixed lengths: 1 to 40 tokens, one longer than a KV block.
            let prompts: Vec<Vec<i32>> = (0..n)
                .map(|i| prompt(i, [1, 7, 40, 3, 12, 33][i % 6], v))
                .collect();
            let max = 64.min(config.model.context_length);
            let mut state = batch_state(&decoder, n * max, max);
            let together = ragged(state.as_mut(), &prompts, steps, chunk, vocab);
            for (i, p) in prompts.iter().enumerate() {
                let want = alone(&decoder, p, steps, max);
                assert_eq!(together[i].len(), want.len());
                for (s, (got, want)) in together[i].iter().zip(&want).enumerate() {
                    let diff = max_abs(got, want);
                    assert!(
                        diff <= 1e-5,
                        "{name}: batch of {n}, sequence {i}, step {s}: logits differ by {diff}"
                    );
                    assert_eq!(argmax(got), argmax(want), "{name}: greedy token");
                }
            }
            let usage = state.kv_usage();
            assert!(
                usage.free_blocks < usage.total_blocks,
                "{name}: blocks were used"
            );
        }
    }
}

#[test]
fn a_padded_generator_batch_gives_each_row_what_it_gives_alone() {
    for dir in native_cpu_models() {
        let (config, decoder) = load(&dir);
        let v = decoder.vocab_size().min(512) as i32;
        let pad = config.model.pad_token_id;
        let name = model_name(&dir);
        let lens = [5usize, 2, 9, 1];
        let width = *lens.iter().max().unwrap_or(&1);
        let rows: Vec<Vec<i32>> = lens
            .iter()
            .enumerate()
            .map(|(i, &len)| {
                prompt(i, len, v)
                    .into_iter()
                    .map(|t| if t == pad { (t + 1) % v } else { t })
                    .collect()
            })
            .collect();
        let mut search = config.search.clone();
        search.do_sample = false;
        search.max_length = width + 12;
        search.batch_size = rows.len();
        let mut batch = Generator::new(&decoder, &config.model, &search).expect("generator");
        let padded: Vec<i32> = rows
            .iter()
            .flat_map(|r| {
                let mut r = r.clone();
                r.resize(width, pad);
                r
            })
            .collect();
        batch.append_tokens(&padded).expect("prompt");
        while !batch.is_done() {
            batch.generate_next_token().expect("step");
        }
        for (i, row) in rows.iter().enumerate() {
            let mut one = search.clone();
            one.batch_size = 1;
            one.max_length = row.len() + (search.max_length - width);
            let mut g = Generator::new(&decoder, &config.model, &one).expect("generator");
            g.append_tokens(row).expect("prompt");
            while !g.is_done() {
                g.generate_next_token().expect("step");
            }
            let alone = &g.sequence(0).expect("row")[row.len()..];
            let together = &batch.sequence(i).expect("row")[width..];
            let n = alone.len().min(together.len());
            assert!(n > 0, "{name}: row {i} generated nothing");
            assert_eq!(
                &together[..n],
                &alone[..n],
                "{name}: row {i} of the padded batch"
            );
        }
    }
}

#[test]
fn a_full_cache_is_a_clear_error_and_changes_nothing() {
    let (_, decoder) = load(&native_cpu_models()[0]);
    let mut state = batch_state(&decoder, 64, 64);
    let usage = state.kv_usage();
    let (a, b) = (state.add_sequence(), state.add_sequence());
    let long = vec![1i32; usage.block_size * usage.total_blocks - 1];
    state
        .step(&[Chunk {
            seq: a,
            tokens: &long,
            logits: LogitsWanted::None,
        }])
        .expect("fits");
    let err = state
        .step(&[
            Chunk {
                seq: a,
                tokens: &[2],
                logits: LogitsWanted::Last,
            },
            Chunk {
                seq: b,
                tokens: &[1, 2],
                logits: LogitsWanted::Last,
            },
        ])
        .unwrap_err();
    assert!(err.to_string().contains("KV cache is full"), "{err}");
    assert_eq!(state.sequence_len(a).unwrap(), long.len());
    assert_eq!(state.sequence_len(b).unwrap(), 0);
    // Bad steps: a sequence twice, an empty chunk, a token outside the vocabulary, an unknown
    // sequence; none changes anything.
    let twice = [
        Chunk {
            seq: b,
            tokens: &[1],
            logits: LogitsWanted::Last,
        },
        Chunk {
            seq: b,
            tokens: &[1],
            logits: LogitsWanted::Last,
        },
    ];
    assert!(state.step(&twice).is_err());
    let empty = [Chunk {
        seq: b,
        tokens: &[],
        logits: LogitsWanted::Last,
    }];
    assert!(state.step(&empty).is_err());
    let outside = [Chunk {
        seq: b,
        tokens: &[i32::MAX],
        logits: LogitsWanted::Last,
    }];
    assert!(state.step(&outside).is_err());
    state.remove_sequence(a).expect("remove");
    assert!(state.sequence_len(a).is_err());
    let unknown = [Chunk {
        seq: a,
        tokens: &[1],
        logits: LogitsWanted::Last,
    }];
    assert!(state.step(&unknown).is_err());
    assert_eq!(state.sequence_len(b).unwrap(), 0);
    assert_eq!(state.kv_usage().free_blocks, usage.total_blocks);
    // A freed cache takes a new sequence.
    let c = state.add_sequence();
    state
        .step(&[Chunk {
            seq: c,
            tokens: &[3, 4],
            logits: LogitsWanted::Last,
        }])
        .expect("room again");
}

/// Search options of one request, for the per-row sampling test.
struct Row {
    prompt: Vec<i32>,
    sample: bool,
    seed: i64,
    top_k: usize,
    top_p: f32,
    temperature: f32,
    penalty: f32,
}

#[test]
fn every_row_of_a_step_has_its_own_sampling_and_gets_what_the_generator_gives_alone() {
    use genai_engine::{Choice, Sampler, SamplingSpec};
    let steps = 10;
    for dir in native_cpu_models() {
        let (config, decoder) = load(&dir);
        let name = model_name(&dir);
        let v = decoder.vocab_size().min(512) as i32;
        let rows = [
            Row {
                prompt: prompt(0, 5, v),
                sample: false,
                seed: 0,
                top_k: 0,
                top_p: 1.0,
                temperature: 1.0,
                penalty: 1.0,
            },
            Row {
                prompt: prompt(1, 9, v),
                sample: true,
                seed: 7,
                top_k: 10,
                top_p: 1.0,
                temperature: 0.7,
                penalty: 1.0,
            },
            Row {
                prompt: prompt(2, 2, v),
                sample: true,
                seed: 3,
                top_k: 0,
                top_p: 0.9,
                temperature: 1.3,
                penalty: 1.0,
            },
            Row {
                prompt: prompt(3, 33, v),
                sample: false,
                seed: 0,
                top_k: 0,
                top_p: 1.0,
                temperature: 1.0,
                penalty: 1.4,
            },
            Row {
                prompt: prompt(4, 12, v),
                sample: true,
                seed: 11,
                top_k: 40,
                top_p: 0.8,
                temperature: 0.9,
                penalty: 1.2,
            },
        ];
        let eos: Vec<i32> = config.model.eos_token_ids.clone();
        // Alone: the generator, batch 1, with the row's options (min_length keeps EOS out).
        let mut want = Vec::new();
        for row in &rows {
            let mut search = config.search.clone();
            search.do_sample = row.sample;
            search.random_seed = row.seed;
            search.top_k = row.top_k;
            search.top_p = row.top_p;
            search.temperature = row.temperature;
            search.repetition_penalty = row.penalty;
            search.max_length = row.prompt.len() + steps;
            search.min_length = search.max_length;
            let mut g = Generator::new(&decoder, &config.model, &search).expect("generator");
            g.append_tokens(&row.prompt).expect("prompt");
            while !g.is_done() {
                g.generate_next_token().expect("step");
            }
            want.push(g.sequence(0).expect("row")[row.prompt.len()..].to_vec());
        }
        // Together: one step for all rows, each with its own spec and seeded stream.
        let mut state = batch_state(&decoder, rows.len() * 64, 64);
        let seqs: Vec<SeqId> = rows.iter().map(|_| state.add_sequence()).collect();
        let mut samplers: Vec<Sampler> = rows.iter().map(|r| Sampler::new(r.seed)).collect();
        let mut sequences: Vec<Vec<i32>> = rows.iter().map(|r| r.prompt.clone()).collect();
        let mut inputs: Vec<Vec<i32>> = rows.iter().map(|r| r.prompt.clone()).collect();
        for _ in 0..steps {
            let penalized: Vec<Vec<i32>> = sequences
                .iter()
                .map(|s| {
                    let mut d = Vec::new();
                    for &t in s {
                        if !d.contains(&t) {
                            d.push(t);
                        }
                    }
                    d
                })
                .collect();
            let specs: Vec<Option<SamplingSpec<'_>>> = rows
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let choice = if r.sample {
                        Choice::Sample {
                            top_k: r.top_k,
                            top_p: r.top_p,
                            temperature: r.temperature,
                            uniform: samplers[i].draw(),
                        }
                    } else {
                        Choice::Greedy
                    };
                    Some(SamplingSpec {
                        choice,
                        penalty: r.penalty,
                        penalized: &penalized[i],
                        suppressed: &eos,
                        no_repeat_ngram: 0,
                    })
                })
                .collect();
            let chunks: Vec<Chunk<'_>> = seqs
                .iter()
                .zip(&inputs)
                .map(|(&seq, tokens)| Chunk {
                    seq,
                    tokens,
                    logits: LogitsWanted::Last,
                })
                .collect();
            let (logits, tokens) = state.step_choose(&chunks, &specs).expect("step");
            assert!(logits.is_empty(), "every row chose a token");
            for (i, &t) in tokens.iter().enumerate() {
                sequences[i].push(t);
                inputs[i] = vec![t];
            }
        }
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(
                &sequences[i][row.prompt.len()..],
                &want[i][..],
                "{name}: row {i} (sample {}, seed {}, penalty {})",
                row.sample,
                row.seed,
                row.penalty
            );
        }
    }
}

#[test]
fn forked_and_truncated_sequences_get_what_they_get_alone() {
    for dir in native_cpu_models() {
        let (config, decoder) = load(&dir);
        let name = model_name(&dir);
        let v = decoder.vocab_size().min(512) as i32;
        let max = 96.min(config.model.context_length);
        let alone_logits = |tokens: &[i32]| -> Vec<f32> {
            let mut s = batch_state(&decoder, max, max);
            let seq = s.add_sequence();
            s.step(&[Chunk {
                seq,
                tokens,
                logits: LogitsWanted::Last,
            }])
            .expect("alone")
        };
        let mut state = batch_state(&decoder, 4 * max, max);
        let base = prompt(9, 45, v);
        let a = state.add_sequence();
        state
            .step(&[Chunk {
                seq: a,
                tokens: &base,
                logits: LogitsWanted::None,
            }])
            .expect("base");
        // Forks inside a block (37: 5 rows into the second block of 32) and at its end (32).
        let b = state.fork_sequence(a, 37).expect("fork");
        let c = state.fork_sequence(a, 32).expect("fork");
        let free_after_forks = state.kv_usage().free_blocks;
        let (ta, tb, tc) = (prompt(1, 3, v), prompt(2, 4, v), prompt(3, 2, v));
        let got = state
            .step(&[
                Chunk {
                    seq: b,
                    tokens: &tb,
                    logits: LogitsWanted::Last,
                },
                Chunk {
                    seq: a,
                    tokens: &ta,
                    logits: LogitsWanted::Last,
                },
                Chunk {
                    seq: c,
                    tokens: &tc,
                    logits: LogitsWanted::Last,
                },
            ])
            .expect("step after the forks");
        let vocab = decoder.vocab_size();
        // b wrote into the block it shared with a and got its own copy; c, at a block's end,
        // took a fresh block; a's tail was its own again: two blocks taken.
        assert_eq!(
            state.kv_usage().free_blocks,
            free_after_forks - 2,
            "{name}: one copy on write and one new block"
        );
        let cat = |p: &[i32], t: &[i32]| [p, t].concat();
        let want = [
            alone_logits(&cat(&base[..37], &tb)),
            alone_logits(&cat(&base, &ta)),
            alone_logits(&cat(&base[..32], &tc)),
        ];
        for (i, w) in want.iter().enumerate() {
            let g = &got[i * vocab..(i + 1) * vocab];
            assert!(max_abs(g, w) <= 1e-5, "{name}: forked sequence {i}");
        }
        // Truncate a back into its shared prefix and go on: as if alone.
        state.truncate_sequence(a, 20).expect("truncate");
        let td = prompt(4, 6, v);
        let got = state
            .step(&[Chunk {
                seq: a,
                tokens: &td,
                logits: LogitsWanted::Last,
            }])
            .expect("step after truncating");
        assert!(
            max_abs(&got, &alone_logits(&cat(&base[..20], &td))) <= 1e-5,
            "{name}: truncated sequence"
        );
        for seq in [a, b, c] {
            state.remove_sequence(seq).expect("remove");
        }
        let usage = state.kv_usage();
        assert_eq!(
            usage.free_blocks, usage.total_blocks,
            "{name}: every block freed"
        );
    }
}

#[test]
fn generate_with_several_prompts_decodes_them_together_as_each_alone() {
    let dir = repo_root().join("models/fixtures/llama-fp32-cpu");
    let dir = dir.to_string_lossy();
    let prompts = ["Hello world", "a", "The quick brown fox jumps"];
    let generate = |prompts: &[&str]| {
        let mut args = vec![
            "generate",
            &dir,
            "--backend",
            "native",
            "--max-new-tokens",
            "8",
            "--json",
        ];
        for p in prompts {
            args.extend(["--prompt", p]);
        }
        run_cli_json(&args)
    };
    let batch = generate(&prompts);
    assert_eq!(batch["route"]["backend"], "native", "{batch}");
    let rows = batch["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), prompts.len());
    for (row, p) in rows.iter().zip(&prompts) {
        let alone = generate(&[p]);
        let prompt_len = ints(&alone["prompt_ids"]).len();
        // Alone, a final EOS is not part of the sequence; the batch row stops before its EOS.
        let want = ints(&alone["sequence"])[prompt_len..].to_vec();
        let got = ints(&row["generated"]);
        assert_eq!(ints(&row["prompt_ids"]), ints(&alone["prompt_ids"]), "{p}");
        assert_eq!(row["stop_reason"], alone["stop_reason"], "{p}");
        assert!(!got.is_empty(), "{p}: nothing generated");
        assert_eq!(got, want, "{p}: the batch row and the prompt alone");
    }
}
