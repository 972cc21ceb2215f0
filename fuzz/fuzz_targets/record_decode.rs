//! Arbitrary bytes into the lock, write and notify record decoders: errors, never panics; whatever
//! decodes re-encodes identically.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use percolator_core::backend::records::{LockRecord, NotifyRecord, WriteRecord};

fuzz_target!(|data: &[u8]| {
    let bytes = Bytes::copy_from_slice(data);
    if let Ok(lock) = LockRecord::decode(&bytes) {
        assert_eq!(lock.encode(), bytes);
    }
    if let Ok((write, inline)) = WriteRecord::decode_with_value(&bytes) {
        let encoded = match inline {
            Some(value) => WriteRecord::encode_inline(write.start_ts, &value),
            None => write.encode(),
        };
        assert_eq!(encoded, bytes);
    }
    if let Ok(notify) = NotifyRecord::decode(&bytes) {
        assert_eq!(notify.encode(), bytes);
    }
});
