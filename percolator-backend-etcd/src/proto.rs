//! The subset of etcd's v3 gRPC API this backend speaks, as prost messages written by hand.
//!
//! Why by hand: etcd's `.proto` files import gogoproto and google-api annotations, and compiling
//! them needs `protoc` at build time, which a fresh machine with only the Rust toolchain does not
//! have (the README's two commands must work there). The messages below carry exactly the field
//! numbers and wire types of `etcdserverpb` (`api/etcdserverpb/rpc.proto`) and `mvccpb`
//! (`api/mvccpb/kv.proto`) of etcd 3.4; fields this backend never sets or reads are left out,
//! which protobuf allows (unknown fields are skipped on decode, absent ones take defaults).

#![allow(missing_docs)] // wire structs: the field names are etcd's, documented in its proto files

/// `etcdserverpb.ResponseHeader`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResponseHeader {
    #[prost(uint64, tag = "1")]
    pub cluster_id: u64,
    #[prost(uint64, tag = "2")]
    pub member_id: u64,
    #[prost(int64, tag = "3")]
    pub revision: i64,
    #[prost(uint64, tag = "4")]
    pub raft_term: u64,
}

/// `mvccpb.KeyValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    #[prost(bytes = "bytes", tag = "1")]
    pub key: bytes::Bytes,
    #[prost(int64, tag = "2")]
    pub create_revision: i64,
    #[prost(int64, tag = "3")]
    pub mod_revision: i64,
    #[prost(int64, tag = "4")]
    pub version: i64,
    #[prost(bytes = "bytes", tag = "5")]
    pub value: bytes::Bytes,
    #[prost(int64, tag = "6")]
    pub lease: i64,
}

/// `etcdserverpb.RangeRequest` (sorting and revision filters left out: keys come back in
/// ascending key order by default).
#[derive(Clone, PartialEq, prost::Message)]
pub struct RangeRequest {
    #[prost(bytes = "bytes", tag = "1")]
    pub key: bytes::Bytes,
    #[prost(bytes = "bytes", tag = "2")]
    pub range_end: bytes::Bytes,
    #[prost(int64, tag = "3")]
    pub limit: i64,
    #[prost(int64, tag = "4")]
    pub revision: i64,
    #[prost(bool, tag = "7")]
    pub serializable: bool,
    #[prost(bool, tag = "8")]
    pub keys_only: bool,
    #[prost(bool, tag = "9")]
    pub count_only: bool,
}

/// `etcdserverpb.RangeResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RangeResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    #[prost(message, repeated, tag = "2")]
    pub kvs: Vec<KeyValue>,
    #[prost(bool, tag = "3")]
    pub more: bool,
    #[prost(int64, tag = "4")]
    pub count: i64,
}

/// `etcdserverpb.PutRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PutRequest {
    #[prost(bytes = "bytes", tag = "1")]
    pub key: bytes::Bytes,
    #[prost(bytes = "bytes", tag = "2")]
    pub value: bytes::Bytes,
    #[prost(int64, tag = "3")]
    pub lease: i64,
}

/// `etcdserverpb.PutResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PutResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
}

/// `etcdserverpb.DeleteRangeRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteRangeRequest {
    #[prost(bytes = "bytes", tag = "1")]
    pub key: bytes::Bytes,
    #[prost(bytes = "bytes", tag = "2")]
    pub range_end: bytes::Bytes,
}

/// `etcdserverpb.DeleteRangeResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteRangeResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    #[prost(int64, tag = "2")]
    pub deleted: i64,
}

/// `etcdserverpb.RequestOp`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RequestOp {
    #[prost(oneof = "request_op::Request", tags = "1, 2, 3, 4")]
    pub request: Option<request_op::Request>,
}

/// The `request` oneof of [`RequestOp`].
pub mod request_op {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Request {
        #[prost(message, tag = "1")]
        RequestRange(super::RangeRequest),
        #[prost(message, tag = "2")]
        RequestPut(super::PutRequest),
        #[prost(message, tag = "3")]
        RequestDeleteRange(super::DeleteRangeRequest),
        #[prost(message, tag = "4")]
        RequestTxn(super::TxnRequest),
    }
}

/// `etcdserverpb.ResponseOp`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResponseOp {
    #[prost(oneof = "response_op::Response", tags = "1, 2, 3, 4")]
    pub response: Option<response_op::Response>,
}

/// The `response` oneof of [`ResponseOp`].
pub mod response_op {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Response {
        #[prost(message, tag = "1")]
        ResponseRange(super::RangeResponse),
        #[prost(message, tag = "2")]
        ResponsePut(super::PutResponse),
        #[prost(message, tag = "3")]
        ResponseDeleteRange(super::DeleteRangeResponse),
        #[prost(message, tag = "4")]
        ResponseTxn(super::TxnResponse),
    }
}

/// `etcdserverpb.Compare.CompareResult`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum CompareResult {
    Equal = 0,
    Greater = 1,
    Less = 2,
    NotEqual = 3,
}

/// `etcdserverpb.Compare.CompareTarget`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum CompareTarget {
    Version = 0,
    Create = 1,
    Mod = 2,
    Value = 3,
    Lease = 4,
}

/// `etcdserverpb.Compare`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Compare {
    #[prost(enumeration = "CompareResult", tag = "1")]
    pub result: i32,
    #[prost(enumeration = "CompareTarget", tag = "2")]
    pub target: i32,
    #[prost(bytes = "bytes", tag = "3")]
    pub key: bytes::Bytes,
    #[prost(oneof = "compare::TargetUnion", tags = "4, 5, 6, 7, 8")]
    pub target_union: Option<compare::TargetUnion>,
    #[prost(bytes = "bytes", tag = "64")]
    pub range_end: bytes::Bytes,
}

/// The `target_union` oneof of [`Compare`].
pub mod compare {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum TargetUnion {
        #[prost(int64, tag = "4")]
        Version(i64),
        #[prost(int64, tag = "5")]
        CreateRevision(i64),
        #[prost(int64, tag = "6")]
        ModRevision(i64),
        #[prost(bytes = "bytes", tag = "7")]
        Value(bytes::Bytes),
        #[prost(int64, tag = "8")]
        Lease(i64),
    }
}

/// `etcdserverpb.TxnRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TxnRequest {
    #[prost(message, repeated, tag = "1")]
    pub compare: Vec<Compare>,
    #[prost(message, repeated, tag = "2")]
    pub success: Vec<RequestOp>,
    #[prost(message, repeated, tag = "3")]
    pub failure: Vec<RequestOp>,
}

/// `etcdserverpb.TxnResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TxnResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    #[prost(bool, tag = "2")]
    pub succeeded: bool,
    #[prost(message, repeated, tag = "3")]
    pub responses: Vec<ResponseOp>,
}

/// `etcdserverpb.CompactionRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CompactionRequest {
    #[prost(int64, tag = "1")]
    pub revision: i64,
    #[prost(bool, tag = "2")]
    pub physical: bool,
}

/// `etcdserverpb.CompactionResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CompactionResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
}

/// `etcdserverpb.StatusRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusRequest {}

/// `etcdserverpb.StatusResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    #[prost(string, tag = "2")]
    pub version: String,
    #[prost(int64, tag = "3")]
    pub db_size: i64,
    #[prost(uint64, tag = "4")]
    pub leader: u64,
    #[prost(uint64, tag = "5")]
    pub raft_index: u64,
    #[prost(uint64, tag = "6")]
    pub raft_term: u64,
}

/// `etcdserverpb.AuthenticateRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AuthenticateRequest {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub password: String,
}

/// `etcdserverpb.AuthenticateResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AuthenticateResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    #[prost(string, tag = "2")]
    pub token: String,
}

/// gRPC method paths.
pub mod paths {
    pub const RANGE: &str = "/etcdserverpb.KV/Range";
    pub const PUT: &str = "/etcdserverpb.KV/Put";
    pub const TXN: &str = "/etcdserverpb.KV/Txn";
    pub const COMPACT: &str = "/etcdserverpb.KV/Compact";
    pub const STATUS: &str = "/etcdserverpb.Maintenance/Status";
    pub const AUTHENTICATE: &str = "/etcdserverpb.Auth/Authenticate";
}
