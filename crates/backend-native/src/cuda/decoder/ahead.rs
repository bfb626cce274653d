//! Running one decode step ahead of the host. After a step whose token was chosen on the device,
//! the next single-token step is enqueued at once, its token id copied on the device from the
//! choice, before the host waits for that id; the host's turn between two steps (the generator's
//! bookkeeping, the caller's streaming) then overlaps the device's work instead of leaving the
//! device idle. The next call takes the step when it asks for exactly it (that token at that
//! position); any other call leaves it unused, which is harmless: it wrote only the KV cache at
//! positions past the cache's length (overwritten by the next steps, as after a rewind), the
//! logits and the step's own inputs, and everything after it on the stream runs after it.

/// The single-token step enqueued ahead: it runs at `position` on the id the step before it
/// chose, which the host learns (`token`) once it has read that id.
pub(super) struct Ahead {
    position: usize,
    token: Option<i32>,
}

impl Ahead {
    /// The step just enqueued ahead at `position` (its token not read yet).
    pub(super) fn at(position: usize) -> Ahead {
        Ahead {
            position,
            token: None,
        }
    }

    /// Whether the step enqueued ahead (`slot`) is the one `tokens` asks for at the cache's
    /// length `len` (it then needs no passes). Every call forgets the step ahead: only the
    /// call right after it may take it.
    pub(super) fn take(slot: &mut Option<Ahead>, len: usize, tokens: &[i32]) -> bool {
        match slot.take() {
            Some(Ahead {
                position,
                token: Some(token),
            }) => position == len && tokens == [token],
            _ => false,
        }
    }

    /// Records that the step ahead (`slot`) runs on `token` (the id the host has just read).
    pub(super) fn runs_on(slot: &mut Option<Ahead>, token: i32) {
        if let Some(ahead) = slot.as_mut() {
            ahead.token = Some(token);
        }
    }
}
