//! The CUDA kernels against the CPU kernels, one check per kernel and variant (see
//! `genai_backend_native::cuda::selftest`). Needs a GPU: with none (as in CI) it prints a loud
//! NOT RUN line.
#![cfg(feature = "cuda")]

use genai_backend_native::cuda::{probe, selftest};

#[test]
fn cuda_kernels_match_the_cpu_kernels() {
    if let Err(why) = probe() {
        eprintln!("NOT RUN: cuda_kernels_match_the_cpu_kernels: no usable CUDA device: {why}");
        return;
    }
    let checks = selftest::run(0).expect("the checks run");
    let mut failed = Vec::new();
    for c in &checks {
        println!(
            "{:<48} rel diff {:.3e} (limit {:.0e}) {}",
            c.name,
            c.rel_diff,
            c.limit,
            if c.pass() { "ok" } else { "FAIL" }
        );
        if !c.pass() {
            failed.push(c.name.clone());
        }
    }
    assert!(failed.is_empty(), "failed: {failed:?}");
}
