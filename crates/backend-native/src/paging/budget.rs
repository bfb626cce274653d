//! The VRAM budget: parsed from `BYTES|PERCENT` (`--vram-budget`), and shared by the sessions
//! of one device, each holding a reservation for its plan until it ends.

use crate::Error;
use std::sync::{Arc, Mutex, PoisonError};

/// A budget as the user gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum VramBudget {
    /// A number of bytes.
    Bytes(u64),
    /// A share of the device's memory, in percent (0, 100].
    Percent(f64),
    /// A share of the model's weight bytes (all but the embedding table, which streaming moves
    /// to host memory), in percent (0, 100], plus the KV cache and workspace: `N%weights`, the
    /// budgets of a sweep.
    WeightShare(f64),
}

impl VramBudget {
    /// Parses `8000000000`, `8GB`, `7.5GiB`, `512MiB`, `50%` or `50%weights`.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let bad = |why: &str| Error::BadBudget {
            text: text.to_string(),
            why: why.to_string(),
        };
        let t = text.trim();
        if let Some(p) = t.strip_suffix("%weights") {
            let v: f64 = p.trim().parse().map_err(|_| bad("not a percentage"))?;
            if !(v > 0.0 && v <= 100.0) {
                return Err(bad("a percentage must be in (0, 100]"));
            }
            return Ok(VramBudget::WeightShare(v));
        }
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p.trim().parse().map_err(|_| bad("not a percentage"))?;
            if !(v > 0.0 && v <= 100.0) {
                return Err(bad("a percentage must be in (0, 100]"));
            }
            return Ok(VramBudget::Percent(v));
        }
        let units: [(&str, f64); 8] = [
            ("GiB", (1u64 << 30) as f64),
            ("MiB", (1u64 << 20) as f64),
            ("KiB", 1024.0),
            ("GB", 1e9),
            ("MB", 1e6),
            ("KB", 1e3),
            ("B", 1.0),
            ("", 1.0),
        ];
        let (number, scale) = units
            .iter()
            .find_map(|(suffix, scale)| t.strip_suffix(suffix).map(|n| (n.trim(), *scale)))
            .unwrap_or((t, 1.0));
        let v: f64 = number.parse().map_err(|_| {
            bad("expected BYTES (optionally with KB/MB/GB/KiB/MiB/GiB) or PERCENT%")
        })?;
        let bytes = v * scale;
        if !(bytes >= 1.0 && bytes < u64::MAX as f64) {
            return Err(bad("a byte budget must be positive"));
        }
        Ok(VramBudget::Bytes(bytes as u64))
    }

    /// The budget in bytes on a device with `device_bytes` of memory, for a model whose
    /// weights (less the embedding table) take `weight_bytes` and whose KV cache and
    /// workspace take `state_bytes`.
    pub fn resolve(self, device_bytes: u64, weight_bytes: u64, state_bytes: u64) -> u64 {
        match self {
            VramBudget::Bytes(b) => b,
            VramBudget::Percent(p) => (device_bytes as f64 * p / 100.0) as u64,
            VramBudget::WeightShare(p) => (weight_bytes as f64 * p / 100.0) as u64 + state_bytes,
        }
    }
}

#[derive(Debug)]
struct Ledger {
    total: u64,
    reserved: u64,
}

/// One device's budget, shared by its sessions: each session plans within what is left and
/// reserves its plan's bytes; ending the session (dropping the reservation) returns them.
/// Changing the total affects the sessions that plan afterwards, never a running one.
#[derive(Debug, Clone)]
pub struct SharedBudget {
    ledger: Arc<Mutex<Ledger>>,
}

/// Bytes held by one session; released on drop.
#[derive(Debug)]
pub struct Reservation {
    ledger: Arc<Mutex<Ledger>>,
    bytes: u64,
}

impl Reservation {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut ledger = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
        ledger.reserved = ledger.reserved.saturating_sub(self.bytes);
    }
}

impl SharedBudget {
    /// A budget of `total` bytes with nothing reserved.
    pub fn new(total: u64) -> Self {
        SharedBudget {
            ledger: Arc::new(Mutex::new(Ledger { total, reserved: 0 })),
        }
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes not reserved by any session (what the next session may plan within).
    pub fn available(&self) -> u64 {
        let ledger = self.ledger();
        ledger.total.saturating_sub(ledger.reserved)
    }

    /// Sets a new total for the sessions planned from now on.
    pub fn set_total(&self, total: u64) {
        self.ledger().total = total;
    }

    /// Reserves `bytes` for a session, or fails with what is left.
    pub fn reserve(&self, bytes: u64) -> Result<Reservation, Error> {
        let mut ledger = self.ledger();
        let available = ledger.total.saturating_sub(ledger.reserved);
        if bytes > available {
            return Err(Error::BudgetTooSmall {
                minimum: bytes,
                budget: available,
            });
        }
        ledger.reserved += bytes;
        Ok(Reservation {
            ledger: Arc::clone(&self.ledger),
            bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_in_bytes_units_and_percent() {
        assert_eq!(VramBudget::parse("1500").unwrap(), VramBudget::Bytes(1500));
        assert_eq!(
            VramBudget::parse("8GB").unwrap(),
            VramBudget::Bytes(8_000_000_000)
        );
        assert_eq!(
            VramBudget::parse("2GiB").unwrap(),
            VramBudget::Bytes(2 << 30)
        );
        assert_eq!(
            VramBudget::parse(" 512 MiB ").unwrap(),
            VramBudget::Bytes(512 << 20)
        );
        assert_eq!(VramBudget::parse("50%").unwrap(), VramBudget::Percent(50.0));
        assert_eq!(VramBudget::Percent(25.0).resolve(1000, 7, 9), 250);
        let share = VramBudget::parse("10%weights").unwrap();
        assert_eq!(share, VramBudget::WeightShare(10.0));
        assert_eq!(share.resolve(1000, 5000, 30), 530);
        assert!(VramBudget::parse("0%weights").is_err());
        for bad in ["", "abc", "0", "-5GB", "150%", "0%", "12XB"] {
            let err = VramBudget::parse(bad).unwrap_err().to_string();
            assert!(err.contains(bad.trim()), "{bad}: {err}");
        }
    }

    #[test]
    fn sessions_share_one_budget_and_changes_apply_to_later_sessions() {
        let budget = SharedBudget::new(1000);
        let a = budget.reserve(600).unwrap();
        assert_eq!(budget.available(), 400);
        let err = budget.reserve(500).unwrap_err();
        assert!(
            matches!(err, Error::BudgetTooSmall { budget: 400, .. }),
            "{err}"
        );
        let b = budget.reserve(400).unwrap();
        assert_eq!(budget.available(), 0);
        drop(a);
        assert_eq!(budget.available(), 600);
        // A smaller total does not take bytes from a running session...
        budget.set_total(500);
        assert_eq!(b.bytes(), 400);
        assert_eq!(budget.available(), 100);
        drop(b);
        // ...and the next session plans within the new total.
        assert_eq!(budget.available(), 500);
        assert!(budget.reserve(501).is_err());
    }
}
