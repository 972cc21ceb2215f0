//! Arbitrary bytes into the key decoder: it must never panic, and whatever decodes must
//! re-encode to exactly the same bytes (the encoding is canonical, hence unambiguous).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    assert!(percolator_core::backend::key::fuzz_check(data));
});
