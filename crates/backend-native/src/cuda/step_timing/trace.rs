//! Reads `step_stream`'s trace (`SS_EVENTS` words per phase and block: SM clock stamps and
//! waits, and %globaltimer beside each READY) into where a streamed layer's time goes: per
//! phase of the layer, the medians over the middle layers of each block's wait for its input,
//! staging, products and release, how far ahead of the consumers the producer was, and how far
//! apart the blocks finished.

/// Words per phase and block, and their order (`SsEvent` in `benches/step_stream.cu`).
pub(super) const EVENTS: usize = 9;
const READY: usize = 0;
const STAGED: usize = 1;
const CONSUMED: usize = 2;
const PUBLISHED: usize = 3;
const FIRST: usize = 4;
const LAST: usize = 5;
const PRODUCER_WAIT: usize = 6;
const FULL_WAIT: usize = 7;
const GLOBAL: usize = 8;

/// One phase of the layer (its position among the layer's phases), medians in µs over the
/// layers but the first and the last. Per block: `await_us` from the block's previous phase's
/// release to this phase's start; `stage_us` x staged (a GEMV); `work_us` the products or the
/// tiny phase's body; `publish_us` the counter's release; `lead_us` how long before the start
/// the producer issued the phase's first slot (negative: after); `producer_span_us` its first
/// to last slot; `producer_wait_us` its waits for empty slots; `full_wait_us` consumer warp 0's
/// waits for full slots. Across blocks: `spread_us` first to last block done; `handoff_us` the
/// last release of the phase before to the first block's start.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRow {
    pub position: usize,
    pub gemv: bool,
    pub await_us: f64,
    pub stage_us: f64,
    pub work_us: f64,
    pub publish_us: f64,
    pub lead_us: f64,
    pub producer_span_us: f64,
    pub producer_wait_us: f64,
    pub full_wait_us: f64,
    pub spread_us: f64,
    pub handoff_us: f64,
}

/// A traced run: its layer's period (the first block's start of a layer to the next layer's,
/// median µs) and a row per phase of the layer that any block ran.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSummary {
    pub layer_us: f64,
    pub rows: Vec<TraceRow>,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A block's SM clock on the common time line: µs = zero + slope * (cycles - base).
#[derive(Debug, Clone, Copy)]
struct Clock {
    slope: f64,
    zero: f64,
    base: u64,
}

impl Clock {
    /// A stamp in µs (the difference from `base` first: both clocks count from far enough back
    /// that an f64 of their raw values is coarser than the phases timed).
    fn at(&self, cycles: u64) -> f64 {
        self.zero + self.slope * cycles.wrapping_sub(self.base) as i64 as f64
    }
}

/// Each block's SM clock on the %globaltimer line (µs from the run's first READY), a
/// least-squares fit over the block's READY pairs (the clocks of different SMs are unrelated;
/// %globaltimer ticks too coarsely for one pair, not for a fit over a run's hundreds).
fn clocks(words: &[u64], phases: usize, blocks: usize) -> Vec<Option<Clock>> {
    let stamps = |b: usize| {
        (0..phases)
            .map(move |i| &words[(i * blocks + b) * EVENTS..][..EVENTS])
            .filter(|e| e[READY] != 0)
    };
    let start = (0..blocks)
        .flat_map(|b| stamps(b).map(|e| e[GLOBAL]))
        .min()
        .unwrap_or(0);
    (0..blocks)
        .map(|b| {
            let base = stamps(b).map(|e| e[READY]).min()?;
            let pairs: Vec<(f64, f64)> = stamps(b)
                .map(|e| {
                    let cycles = e[READY].wrapping_sub(base) as i64 as f64;
                    (cycles, e[GLOBAL].wrapping_sub(start) as i64 as f64 / 1e3)
                })
                .collect();
            let n = pairs.len() as f64;
            let (mc, mg) = pairs
                .iter()
                .fold((0.0, 0.0), |(c, g), p| (c + p.0 / n, g + p.1 / n));
            let cov: f64 = pairs.iter().map(|p| (p.0 - mc) * (p.1 - mg)).sum();
            let var: f64 = pairs.iter().map(|p| (p.0 - mc).powi(2)).sum();
            (pairs.len() >= 2 && var > 0.0).then(|| {
                let slope = cov / var;
                Clock {
                    slope,
                    zero: mg - slope * mc,
                    base,
                }
            })
        })
        .collect()
}

/// Summarizes the trace `words` of `phases` phases (`layer` a layer, `gemv[i]` whether phase i
/// of a layer is a GEMV) run by `blocks` blocks. None when the trace holds fewer than three
/// layers or no phase ran; a figure whose block's clock could not be placed is left out (NaN
/// when none could).
pub fn summarize(
    words: &[u64],
    layer: usize,
    gemv: &[bool],
    blocks: usize,
) -> Option<TraceSummary> {
    let phases = words.len() / (blocks * EVENTS);
    if layer == 0 || gemv.len() != layer || phases < 3 * layer {
        return None;
    }
    let clock = clocks(words, phases, blocks);
    let ev = |i: usize, b: usize| &words[(i * blocks + b) * EVENTS..][..EVENTS];
    // A block's event on the common time line (µs), None where it was not written.
    let at = |i: usize, b: usize, e: usize| -> Option<f64> {
        let v = ev(i, b)[e];
        (v != 0).then_some(clock[b]?.at(v))
    };
    let cycles = |i: usize, b: usize, e: usize| clock[b].map(|c| c.slope * ev(i, b)[e] as f64);
    let ran = |i: usize| (0..blocks).any(|b| ev(i, b)[READY] != 0);
    let span = |i: usize, b: usize, from: usize, to: usize| Some(at(i, b, to)? - at(i, b, from)?);
    let layers = phases / layer;
    let mut rows = Vec::new();
    for position in (0..layer).filter(|&p| (0..layers).any(|l| ran(l * layer + p))) {
        let g = gemv[position];
        let mut per_block: [Vec<f64>; 8] = Default::default();
        let (mut spread, mut handoff) = (Vec::new(), Vec::new());
        for l in 1..layers - 1 {
            let i = l * layer + position;
            let dep = (0..i).rev().find(|&j| ran(j));
            for b in (0..blocks).filter(|&b| ev(i, b)[READY] != 0) {
                let previous = (0..i).rev().find(|&j| ev(j, b)[PUBLISHED] != 0);
                let samples = [
                    previous.and_then(|j| Some(at(i, b, READY)? - at(j, b, PUBLISHED)?)),
                    if g { span(i, b, READY, STAGED) } else { None },
                    span(i, b, if g { STAGED } else { READY }, CONSUMED),
                    span(i, b, CONSUMED, PUBLISHED),
                    if g { span(i, b, FIRST, READY) } else { None },
                    if g { span(i, b, FIRST, LAST) } else { None },
                    if g { cycles(i, b, PRODUCER_WAIT) } else { None },
                    if g { cycles(i, b, FULL_WAIT) } else { None },
                ];
                for (into, s) in per_block.iter_mut().zip(samples) {
                    into.extend(s);
                }
            }
            let done: Vec<f64> = (0..blocks).filter_map(|b| at(i, b, CONSUMED)).collect();
            let first = done.iter().copied().fold(f64::INFINITY, f64::min);
            let last = done.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            spread.push(last - first);
            if let Some(j) = dep {
                let released = (0..blocks)
                    .filter_map(|b| at(j, b, PUBLISHED))
                    .fold(f64::NEG_INFINITY, f64::max);
                let started = (0..blocks)
                    .filter_map(|b| at(i, b, READY))
                    .fold(f64::INFINITY, f64::min);
                handoff.push(started - released);
            }
        }
        let [a, s, w, p, lead, ps, pw, fw] = per_block.map(median);
        rows.push(TraceRow {
            position,
            gemv: g,
            await_us: a,
            stage_us: s,
            work_us: w,
            publish_us: p,
            lead_us: lead,
            producer_span_us: ps,
            producer_wait_us: pw,
            full_wait_us: fw,
            spread_us: median(spread),
            handoff_us: median(handoff),
        });
    }
    // The layer's period: the first block's start of its first phase that ran, layer to layer.
    let first = (0..layer).find(|&p| ran(p))?;
    let starts: Vec<f64> = (0..layers)
        .map(|l| {
            (0..blocks)
                .filter_map(|b| at(l * layer + first, b, READY))
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let periods = starts.windows(2).map(|w| w[1] - w[0]).collect();
    Some(TraceSummary {
        layer_us: median(periods),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic trace: 2 blocks, layers of [tiny (block 0 only), GEMV], SM clocks at 2
    /// cycles a ns from far back (2^60, block 1's 1,000,000 cycles ahead of block 0's), and
    /// %globaltimer at 2^60 ns (as the real clocks: an f64 of their raw values is coarser than
    /// 0.1 µs), each layer 10 µs.
    fn synthetic(layers: usize) -> Vec<u64> {
        let (blocks, layer) = (2usize, 2usize);
        let mut w = vec![0u64; layers * layer * blocks * EVENTS];
        for l in 0..layers {
            let base_ns = 1_000_000 + l as u64 * 10_000;
            for b in 0..blocks {
                let offset = (1u64 << 60) + b as u64 * 1_000_000;
                let mut put = |i: usize, e: usize, ns: u64| {
                    w[(i * blocks + b) * EVENTS + e] = offset + ns * 2;
                };
                let tiny = l * layer;
                if b == 0 {
                    put(tiny, READY, base_ns);
                    put(tiny, CONSUMED, base_ns + 1_000);
                    put(tiny, PUBLISHED, base_ns + 1_500);
                }
                // The GEMV: ready 500 ns after the tiny phase's release (block 1 200 ns
                // later), staged 1 µs later, products 4 µs, release 0.5 µs; the producer began
                // 3 µs before the start and issued for 2 µs.
                let g = l * layer + 1;
                let ready = base_ns + 2_000 + b as u64 * 200;
                put(g, READY, ready);
                put(g, STAGED, ready + 1_000);
                put(g, CONSUMED, ready + 5_000);
                put(g, PUBLISHED, ready + 5_500);
                put(g, FIRST, ready - 3_000);
                put(g, LAST, ready - 1_000);
                let i = (g * blocks + b) * EVENTS;
                w[i + PRODUCER_WAIT] = 600; // cycles: 0.3 µs
                w[i + FULL_WAIT] = 2_000; // 1 µs
                for i in [tiny, g] {
                    let e = (i * blocks + b) * EVENTS;
                    if w[e + READY] != 0 {
                        w[e + GLOBAL] = (1u64 << 60) + (w[e + READY] - offset) / 2;
                    }
                }
            }
        }
        w
    }

    #[test]
    fn a_synthetic_trace_reads_back() {
        let s = summarize(&synthetic(6), 2, &[false, true], 2).expect("summary");
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(close(s.layer_us, 10.0), "{}", s.layer_us);
        assert_eq!(s.rows.len(), 2);
        let (tiny, g) = (&s.rows[0], &s.rows[1]);
        assert!(!tiny.gemv && g.gemv && g.position == 1);
        assert!(close(tiny.work_us, 1.0) && close(tiny.publish_us, 0.5));
        // The tiny phase waits for block 0's GEMV of the layer before: released at +7.5 µs,
        // the next layer starts at +10.
        assert!(close(tiny.await_us, 2.5), "{}", tiny.await_us);
        assert!(tiny.stage_us.is_nan() && tiny.lead_us.is_nan());
        // Block 0 starts 0.5 µs after its own release (of the tiny phase), block 1 (which ran
        // no tiny phase) 4.5 µs after its GEMV of the layer before; the median of the two
        // blocks' samples is the upper one.
        assert!(close(g.await_us, 4.5), "{}", g.await_us);
        // From the last block's release of the GEMV before (block 1's) to block 0's start.
        assert!(close(tiny.handoff_us, 2.3) && close(tiny.spread_us, 0.0));
        assert!(close(g.stage_us, 1.0) && close(g.work_us, 4.0) && close(g.publish_us, 0.5));
        assert!(close(g.lead_us, 3.0) && close(g.producer_span_us, 2.0));
        assert!(close(g.producer_wait_us, 0.3) && close(g.full_wait_us, 1.0));
        assert!(close(g.spread_us, 0.2) && close(g.handoff_us, 0.5));
    }

    #[test]
    fn traces_too_short_or_unplaced_give_none() {
        assert_eq!(summarize(&synthetic(1), 2, &[false, true], 2), None);
        assert_eq!(summarize(&synthetic(6), 0, &[], 2), None);
        assert_eq!(
            summarize(&vec![0u64; 6 * 2 * 2 * EVENTS], 2, &[false, true], 2),
            None
        );
    }
}
