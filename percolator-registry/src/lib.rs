//! # percolator-registry
//!
//! The one place that knows every backend: which exist ([`catalogue`]), how a user names a store
//! ([`StoreSpec`]: `fjall:PATH`, `sled:PATH`, `mem`, `etcd:URL[,URL…]`, `tikv:PD[,PD…]`), and how
//! to open one as a [`percolator_core::DynStore`] (`Arc<dyn RowStore>`) together with the
//! timestamp oracle its cluster imposes, if any ([`open()`]).
//!
//! The `percolator` command, the benchmark driver and `cargo xtask` all go through it, so adding
//! a backend means one entry in [`catalogue::BACKENDS`], one arm in [`open()`] and one cargo
//! feature here (`docs/dev/README.md`, "Adding a backend").
//!
//! Cargo features choose what can be opened: `mem`, `sled`, `fjall`, `etcd`, `tikv` (each
//! implies `open`). Without any feature the crate is only the catalogue and the spec parser, with
//! no dependency on the engine, which is what `xtask` uses to list backends cheaply.
//!
//! ```
//! use percolator_registry::StoreSpec;
//!
//! let spec: StoreSpec = "fjall:target/wi".parse().unwrap();
//! assert_eq!(spec.backend().name, "fjall");
//! assert_eq!(spec.to_string(), "fjall:target/wi");
//! assert!("nosuch:x".parse::<StoreSpec>().is_err());
//! ```

pub mod catalogue;
mod spec;

#[cfg(feature = "open")]
mod maintenance;
#[cfg(feature = "open")]
mod open;

pub use catalogue::{Backend, Kind, Server};
pub use spec::{SpecError, StoreSpec};

#[cfg(feature = "open")]
pub use maintenance::{CompactError, CompactReport, compact};
#[cfg(feature = "open")]
pub use open::{OpenError, OpenOptions, OpenedStore, open};
