//! For backend implementers: what a [`RowStore`](crate::RowStore) implementation needs beyond
//! the trait itself. Applications do not need this module.
//!
//! - [`key`]: the order-preserving, unambiguous byte encoding of `(table, row, column, ts)`
//!   that ordered key-value engines store cells under;
//! - [`records`]: the lock, write and notify records the protocol stores in cells (a backend
//!   that keeps some of them in memory, as fjall does, decodes them);
//! - [`validate`]: the checks every `mutate_rows` runs first (limits, empty names, repeated
//!   rows);
//! - [`scan`]: row bounds, version limits and paging for backends that walk their own key
//!   order.
//!
//! Shared building blocks of the single-process embedded engines (row latches, group sync,
//! planning a conditional mutation into key writes) are in the `percolator-backend-embedded`
//! crate; the behaviour every backend must show is the conformance suite (feature
//! `conformance`).

pub mod key;
pub mod records;
pub mod scan;
pub mod validate;
