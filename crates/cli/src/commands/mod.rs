//! One module per subcommand.

pub mod bench;
pub mod chat;
pub mod generate;
pub mod inspect;
pub mod parity;
pub mod plot;
pub mod route;
