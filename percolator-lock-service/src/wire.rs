//! The wire protocol: length-delimited frames (`tokio_util`'s `LengthDelimitedCodec`, a 4-byte
//! big-endian length), each holding one protobuf message (`prost`).
//!
//! A client sends [`Request`]s and reads [`Response`]s on one TCP connection, answered in the
//! order sent. One request carries the releases and lock attempts its client queued while the
//! previous request was out; the connection is the holder of the locks it was granted.

use bytes::{Bytes, BytesMut};
use prost::Message as _;
use tokio_util::codec::LengthDelimitedCodec;

/// The largest frame either side accepts. A client splits its queue into requests below
/// [`MAX_REQUEST_BYTES`], so only a hostile or broken peer meets this.
pub const MAX_FRAME: usize = 4 * 1024 * 1024;

/// Where a client stops adding rows to a request.
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// The longest table name plus row key a lock may be taken on; longer ones are not sent (the
/// client answers them unavailable, and the row runs without a lock).
pub const MAX_KEY_BYTES: usize = 64 * 1024;

/// One row: a table and a row key.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct RowKey {
    /// The table.
    #[prost(bytes = "bytes", tag = "1")]
    pub table: Bytes,
    /// The row key.
    #[prost(bytes = "bytes", tag = "2")]
    pub row: Bytes,
}

/// Releases, then lock attempts, from one holder.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    /// Echoed in the response.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Locks this connection holds and lets go (others' are left alone).
    #[prost(message, repeated, tag = "2")]
    pub release: Vec<RowKey>,
    /// Rows to lock for this connection.
    #[prost(message, repeated, tag = "3")]
    pub acquire: Vec<RowKey>,
}

/// The answer to one [`Request`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct Response {
    /// The request's id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// One per `acquire`, in order: granted (this connection holds it now, or held it
    /// already) or not (another connection holds it).
    #[prost(bool, repeated, tag = "2")]
    pub granted: Vec<bool>,
}

/// The codec both sides frame messages with.
pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME)
        .new_codec()
}

/// Encodes a message into one frame's payload.
pub fn encode(message: &impl prost::Message) -> Bytes {
    let mut out = BytesMut::with_capacity(message.encoded_len());
    // Encoding into a buffer with enough capacity cannot fail.
    let _ = message.encode(&mut out);
    out.freeze()
}

/// Decodes a request frame.
pub fn decode_request(frame: BytesMut) -> Result<Request, prost::DecodeError> {
    Request::decode(frame)
}

/// Decodes a response frame.
pub fn decode_response(frame: BytesMut) -> Result<Response, prost::DecodeError> {
    Response::decode(frame)
}

/// The bytes a row adds to a request (its key and framing, roughly).
pub fn row_cost(key: &RowKey) -> usize {
    key.table.len() + key.row.len() + 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let key = RowKey {
            table: Bytes::from_static(b"docs"),
            row: Bytes::from_static(b"https://example.com/a"),
        };
        let request = Request {
            id: 7,
            release: vec![key.clone()],
            acquire: vec![key.clone(), key],
        };
        let back = decode_request(BytesMut::from(&encode(&request)[..])).unwrap();
        assert_eq!(back, request);
        let response = Response {
            id: 7,
            granted: vec![true, false],
        };
        let back = decode_response(BytesMut::from(&encode(&response)[..])).unwrap();
        assert_eq!(back, response);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_request(BytesMut::from(&[0xff, 0xff, 0xff][..])).is_err());
        assert!(decode_response(BytesMut::from(&[0x12, 0x80][..])).is_err());
    }
}
