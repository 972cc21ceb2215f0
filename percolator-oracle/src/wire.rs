//! The wire protocol: length-delimited frames (`tokio_util`'s `LengthDelimitedCodec`, a 4-byte
//! big-endian length) each holding one protobuf message (`prost`).
//!
//! A client sends [`Request`]s and reads [`Response`]s on one TCP connection. Requests are
//! answered in the order they were sent, so a client may keep several in flight (pipelining).
//! One request asks for `count` consecutive timestamps on behalf of many callers: the client
//! batches what its callers queued while the previous request was out, and the server answers
//! every request that arrived together with one allocation and one write.

use bytes::{Bytes, BytesMut};
use prost::Message as _;
use tokio_util::codec::LengthDelimitedCodec;

/// The most timestamps one request may ask for.
pub const MAX_COUNT: u32 = 1 << 16;

/// The largest frame either side accepts (messages are a few dozen bytes; an error message
/// is cut to fit).
pub const MAX_FRAME: usize = 4 * 1024;

/// Asks for `count` consecutive timestamps.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    /// Echoed in the response.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// How many timestamps (1..=[`MAX_COUNT`]).
    #[prost(uint32, tag = "2")]
    pub count: u32,
}

/// The answer to one [`Request`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct Response {
    /// The request's id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// The first of the request's `count` timestamps (when `status` is `Ok`).
    #[prost(uint64, tag = "2")]
    pub first: u64,
    /// A [`Status`].
    #[prost(enumeration = "Status", tag = "3")]
    pub status: i32,
    /// What went wrong, for the caller's error.
    #[prost(string, tag = "4")]
    pub message: String,
}

/// How a request went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum Status {
    /// Served.
    Ok = 0,
    /// This instance is a standby (or was deposed): ask another one.
    NotLeader = 1,
    /// This instance leads but cannot serve right now (its lease lapsed while the store was
    /// unreachable, or the store failed): ask another one, or again later.
    Unavailable = 2,
    /// The request was malformed (a count of 0 or above [`MAX_COUNT`]).
    BadRequest = 3,
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

/// A response carrying an error, its message cut to fit a frame.
pub fn failure(id: u64, status: Status, message: &str) -> Response {
    let mut message = message.to_owned();
    if message.len() > MAX_FRAME / 2 {
        let mut cut = MAX_FRAME / 2;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
    }
    Response {
        id,
        first: 0,
        status: status as i32,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let request = Request { id: 7, count: 64 };
        let bytes = encode(&request);
        assert_eq!(decode_request(BytesMut::from(&bytes[..])).unwrap(), request);
        let response = failure(9, Status::NotLeader, &"x".repeat(10 * MAX_FRAME));
        let bytes = encode(&response);
        assert!(bytes.len() < MAX_FRAME);
        let back = decode_response(BytesMut::from(&bytes[..])).unwrap();
        assert_eq!(back.status(), Status::NotLeader);
        assert_eq!(back.id, 9);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_request(BytesMut::from(&[0xff, 0xff, 0xff][..])).is_err());
    }
}
