//! Opening a model folder for generation, once, for every front end: the [`Session`] holds the
//! config, the runtime [`Settings`], the route and the decoder it picked, the tokenizer and the
//! rules for what the routed decoder cannot run. The CLI and the C ABI open models through it.

mod cuda;
mod decide;
mod error;
mod files;
mod open;
mod options;
mod precision;
mod session;
pub mod settings;
mod verify;

pub use decide::{Decision, decide};
pub use error::Error;
pub use files::{load_config, load_graph, load_tokenizer};
pub use genai_backend_native::paging::VramBudget;
pub use options::OpenOptions;
pub use precision::precision_of;
pub use session::{Session, Started};
pub use settings::{BudgetSetting, Settings, VRAM_BUDGET_ENV};
