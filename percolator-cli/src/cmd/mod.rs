//! One module per `percolator` subcommand.

pub mod bank;
pub mod compact;
pub mod debug;
pub mod gc;
pub mod locks;
pub mod observers;
pub mod oracle;
pub mod remote;
pub mod serve;
pub mod webindex;
