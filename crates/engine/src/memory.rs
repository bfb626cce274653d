//! Refusing allocations the machine cannot hold, before they are made: Rust aborts the process
//! when an allocation fails, so sizes that come from a model or a config (KV caches, converted
//! weights) are checked against the memory available first and turned into a clear error.

use crate::{Error, Result};

/// Bytes of memory genai-bridge may allocate now: what the system says is available
/// (`MemAvailable` on Linux), capped by `cap` (bytes; the caller's setting, e.g. the native
/// decoders' `GENAI_BRIDGE_MEMORY_LIMIT`) when given; `None` when neither is known, and then
/// nothing is refused on this ground.
pub fn available_memory(cap: Option<u64>) -> Option<u64> {
    match (system_available(), cap) {
        (Some(system), Some(cap)) => Some(system.min(cap)),
        (system, cap) => system.or(cap),
    }
}

fn system_available() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The size of `count` elements of `element_bytes` each, or an error naming `what` (and the
/// memory available under `cap`) when the product overflows.
pub fn checked_bytes(
    what: &str,
    counts: &[usize],
    element_bytes: usize,
    cap: Option<u64>,
) -> Result<u64> {
    counts
        .iter()
        .try_fold(element_bytes as u64, |acc, &c| acc.checked_mul(c as u64))
        .ok_or_else(|| Error::OutOfMemory {
            what: what.to_string(),
            bytes: u64::MAX,
            available: available_memory(cap).unwrap_or(0),
        })
}

/// Fails with [`Error::OutOfMemory`] when `bytes` exceed the memory available (as
/// [`available_memory`] reports it under `cap`).
pub fn ensure_fits(what: &str, bytes: u64, cap: Option<u64>) -> Result<()> {
    let Some(available) = available_memory(cap) else {
        return Ok(());
    };
    if bytes > available {
        return Err(Error::OutOfMemory {
            what: what.to_string(),
            bytes,
            available,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_past_the_limit_are_refused_with_the_figures() {
        assert!(ensure_fits("x", 10, Some(10)).is_ok());
        let err = ensure_fits("the KV cache", 11, Some(10)).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("the KV cache") && text.contains("11"),
            "{text}"
        );
        assert!(checked_bytes("x", &[usize::MAX, 4], 4, None).is_err());
        assert_eq!(checked_bytes("x", &[3, 5], 2, None).unwrap(), 30);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_system_reports_some_available_memory() {
        let available = available_memory(None).expect("MemAvailable in /proc/meminfo");
        assert!(available > 0);
        assert_eq!(available_memory(Some(10)), Some(10));
        assert!(ensure_fits("everything", u64::MAX / 2, None).is_err());
    }
}
