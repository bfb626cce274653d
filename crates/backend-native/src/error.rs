//! The crate's error type: shape and argument problems are reported, never panicked on.

/// What went wrong in a kernel call or while preparing weights.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A buffer does not have the length its shape implies.
    #[error("{what}: expected {expected} elements, got {got}")]
    Length {
        /// Which argument.
        what: &'static str,
        /// The length the other arguments imply.
        expected: usize,
        /// The length passed.
        got: usize,
    },
    /// An argument is out of its valid range or inconsistent with the others.
    #[error("{what}: {why}")]
    Invalid {
        /// Which argument.
        what: &'static str,
        /// Why it is rejected.
        why: String,
    },
    /// A device buffer given to a kernel launch holds fewer values than the launch's dimensions
    /// make the kernel read or write.
    #[error("{kernel}: {arg} holds {given} values, the launch needs {needed}")]
    BadExtent {
        /// The kernel.
        kernel: &'static str,
        /// Which argument.
        arg: &'static str,
        /// The values the launch reads or writes through it.
        needed: usize,
        /// The values the buffer holds.
        given: usize,
    },
    /// A weight the plan names is missing or malformed in the model.
    #[error("model weight {what}: {message}")]
    Model {
        /// The initializer.
        what: String,
        /// What is wrong with it.
        message: String,
    },
    /// The worker threads could not be started.
    #[error("thread pool: {0}")]
    ThreadPool(String),
    /// A CUDA driver call failed, or no usable driver or device was found.
    #[error("CUDA {what}: {message}")]
    Cuda {
        /// The operation.
        what: &'static str,
        /// The driver's error, or why the device is unusable.
        message: String,
    },
    /// A VRAM budget too small to run the model even with every streamable weight streamed.
    #[error(
        "a VRAM budget of {budget} bytes ({:.2} GB) is too small: this model needs at least \
         {minimum} bytes ({:.2} GB): the KV cache, workspace, lm_head and norms resident, plus \
         one streaming slot for its largest streamed weight",
        *.budget as f64 / 1e9,
        *.minimum as f64 / 1e9
    )]
    BudgetTooSmall {
        /// The smallest budget that runs.
        minimum: u64,
        /// The budget given (or what was left of it).
        budget: u64,
    },
    /// A `--vram-budget` value that does not parse.
    #[error("--vram-budget \"{text}\": {why}")]
    BadBudget {
        /// The text given.
        text: String,
        /// Why it is rejected.
        why: String,
    },
    /// A tuning variable with a value it does not accept (`settings.rs`).
    #[error("{name}={value:?}: expected {expected}")]
    Setting {
        /// The variable.
        name: &'static str,
        /// The value given.
        value: String,
        /// What it accepts.
        expected: String,
    },
    /// NVRTC could not compile a kernel family; `log` is the compiler's log.
    #[error("NVRTC could not compile kernels/{family}.cu for {arch}: {message}\n{log}")]
    Nvrtc {
        /// The kernel family (file stem in `kernels/`).
        family: &'static str,
        /// The target architecture, e.g. `sm_90`.
        arch: String,
        /// NVRTC's status.
        message: String,
        /// NVRTC's program log.
        log: String,
    },
}

/// Checks that `got == expected`, naming the argument otherwise.
pub(crate) fn check_len(what: &'static str, expected: usize, got: usize) -> Result<(), Error> {
    if expected == got {
        Ok(())
    } else {
        Err(Error::Length {
            what,
            expected,
            got,
        })
    }
}

/// An [`Error::Invalid`] for `what`.
pub(crate) fn invalid(what: &'static str, why: impl Into<String>) -> Error {
    Error::Invalid {
        what,
        why: why.into(),
    }
}

/// `a * b`, or an error naming `what` when the product overflows `usize`.
pub(crate) fn mul(what: &'static str, a: usize, b: usize) -> Result<usize, Error> {
    a.checked_mul(b)
        .ok_or_else(|| invalid(what, format!("size {a} x {b} overflows")))
}
