//! The ways the timing prototype runs a step (one launch per phase, persistent, streamed with
//! its options and diagnostics), by name, and the run that times the chosen ones on each model
//! shape against the launch form's bits.

use super::proto::{PhaseKind, Step, StepTiming, load};
use super::stream::StreamOpts;
use super::trace::{self, TraceSummary};
use crate::cuda::device::Device;
use crate::cuda::launch::launch_error as cuda;
use crate::error::Error;
use cudarc::driver::CudaStream;
use std::sync::Arc;

/// The ways of running a step that [`time_steps`] times, by name: launches; persistent with 1
/// and 2 (`persistent2`) blocks an SM, with and without `early`; streamed with and without the
/// norm fold and the evict-first copies (4 producer lanes); the best streamed form
/// ([`StreamOpts::BEST`]) with 16 and 32 KiB slots, with 1, 2 and 8 producer lanes (`-p1` is
/// round 25's form), with one release a consumer warp (`-warps`), its diagnostics, and traced
/// (`trace`, `trace-nocopy`).
fn ways(sms: usize) -> Vec<(String, Way)> {
    let mut ways = vec![("launches".to_string(), Way::Launches)];
    for per_sm in [1, 2] {
        for early in [true, false] {
            let name = format!(
                "persistent{}{}",
                if per_sm == 2 { "2" } else { "" },
                if early { "-early" } else { "" }
            );
            ways.push((name, Way::Persistent((sms * per_sm, early))));
        }
    }
    let best = StreamOpts::BEST;
    let mut stream = |name: String, opts: StreamOpts| ways.push((name, Way::Stream(opts)));
    for (fold, evict) in [(false, false), (false, true), (true, false), (true, true)] {
        let name = format!(
            "stream{}{}",
            if fold { "-fold" } else { "" },
            if evict { "-evict" } else { "" }
        );
        stream(
            name,
            StreamOpts {
                fold,
                evict,
                ..best
            },
        );
    }
    for slot_kib in [16, 32] {
        stream(
            format!("stream-fold-evict-{slot_kib}k"),
            StreamOpts { slot_kib, ..best },
        );
    }
    // 16 lanes failed every launch in round 26 (calls 3-5, call 5 with the batch barrier; the
    // cause is not known), and a failed launch ends every later variant of the process: not
    // among the ways (`--variants` cannot name them either).
    for planes in [1, 2, 8] {
        stream(
            format!("stream-fold-evict-p{planes}"),
            StreamOpts { planes, ..best },
        );
    }
    stream(
        "stream-fold-evict-warps".into(),
        StreamOpts {
            per_warp: true,
            ..best
        },
    );
    // Diagnostics of the best form (`diag` bits of step_stream.cu): no products, no copies, no
    // waits for the chain; neither products nor waits (the weight stream alone); none of the
    // three (the ring's protocol alone: slots armed, waited for and released).
    for (name, diag) in [
        ("nocompute", 1),
        ("nocopy", 2),
        ("nowait", 4),
        ("stream-only", 5),
        ("protocol-only", 7),
    ] {
        stream(format!("stream-diag-{name}"), StreamOpts { diag, ..best });
    }
    for (name, diag) in [("trace", 0), ("trace-nocopy", 2)] {
        let traced = StreamOpts {
            diag,
            trace: true,
            ..best
        };
        stream(name.to_string(), traced);
    }
    ways
}

/// Times `models` (see [`step_shape`]) on device `ordinal` the [`ways`] named in `only` (all
/// when empty), `reps` timed replays each. A way that cannot run (a cooperative grid that does
/// not fit) is reported with its error. Each timing goes to `report` as soon as it is measured
/// (a way that hangs leaves the ones before it). `defines`: the prototype's knobs
/// (`CudaTuning::nvrtc_defines`).
pub fn time_steps(
    ordinal: usize,
    models: &[String],
    only: &[String],
    reps: usize,
    defines: &[crate::settings::NvrtcDefine],
    report: &mut dyn FnMut(&StepTiming),
) -> Result<(), Error> {
    let device = Device::open(ordinal)?;
    let stream = device.ctx.new_stream().map_err(cuda("stream"))?;
    let proto = load(&device, defines)?;
    let all = ways(proto.sms);
    let chosen: Vec<&(String, Way)> = all
        .iter()
        .filter(|(name, _)| only.is_empty() || only.contains(name))
        .collect();
    if chosen.is_empty() {
        let known: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        return Err(crate::error::invalid(
            "step variants",
            format!("none of {only:?} is one of {known:?}"),
        ));
    }
    for model in models {
        let step = Step::new(&stream, &proto, model)?;
        let layers = step.shape.3;
        // The first way run is the reference for the bits (launches, when chosen).
        let mut reference: Option<Vec<u32>> = None;
        for (variant, way) in chosen.iter().copied() {
            let way = *way;
            let enqueue = || match way {
                Way::Launches => step.launches(&stream, &proto),
                Way::Persistent((blocks, early)) => step.persistent(&stream, &proto, blocks, early),
                Way::Stream(opts) => step.streamed(&stream, &proto, opts),
            };
            let mut t = StepTiming {
                model: model.clone(),
                variant: variant.clone(),
                blocks: match way {
                    Way::Launches => 0,
                    Way::Persistent((blocks, _)) => blocks,
                    Way::Stream(_) => proto.sms,
                },
                layers,
                us_per_layer_median: f64::NAN,
                us_per_layer_min: f64::NAN,
                weight_gbs: f64::NAN,
                same_bits: false,
                error: None,
                trace: None,
            };
            match step.time(&stream, reps, &enqueue) {
                Ok(((median, min), result)) => {
                    let bits: Vec<u32> = result.iter().map(|x| x.to_bits()).collect();
                    t.same_bits = reference.get_or_insert_with(|| bits.clone()) == &bits;
                    t.us_per_layer_median = median / layers as f64;
                    t.us_per_layer_min = min / layers as f64;
                    t.weight_gbs = step.layer_bytes as f64 / t.us_per_layer_median / 1e3;
                    if matches!(way, Way::Stream(o) if o.trace) {
                        t.trace = step.read_trace(&stream, proto.sms)?;
                    }
                }
                Err(e) => t.error = Some(e.to_string()),
            }
            report(&t);
        }
    }
    Ok(())
}

impl Step {
    /// The last traced run's trace, summarized (None when it could not be placed in time).
    fn read_trace(
        &self,
        stream: &Arc<CudaStream>,
        blocks: usize,
    ) -> Result<Option<TraceSummary>, Error> {
        let mut words = vec![0u64; self.trace.len];
        self.trace.read(stream, &mut words)?;
        let per_layer = self.phases.len() / self.shape.3;
        let gemv: Vec<bool> = self.phases[..per_layer]
            .iter()
            .map(|p| p.kind == PhaseKind::Gemv)
            .collect();
        Ok(trace::summarize(&words, per_layer, &gemv, blocks))
    }
}

/// A way of running the step.
#[derive(Debug, Clone, Copy)]
enum Way {
    /// One launch per phase.
    Launches,
    /// `step_persistent` with (blocks, early).
    Persistent((usize, bool)),
    /// `step_stream`.
    Stream(StreamOpts),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ways_have_distinct_names_and_the_best_form_is_stream_fold_evict() {
        let all = ways(132);
        let mut names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "duplicate names");
        let best = all
            .iter()
            .find(|(n, _)| n == "stream-fold-evict")
            .map(|(_, w)| *w);
        assert!(matches!(best, Some(Way::Stream(o)) if o == StreamOpts::BEST));
        for (name, way) in &all {
            if let Way::Stream(o) = way {
                assert!((1..=8).contains(&o.planes), "{name}: {} lanes", o.planes);
                assert_eq!(o.trace, name.starts_with("trace"), "{name}");
                assert_eq!(
                    o.diag != 0,
                    name.contains("diag") || name.ends_with("nocopy")
                );
            }
        }
    }
}
