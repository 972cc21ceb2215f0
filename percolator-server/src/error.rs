//! [`ApiError`]: every failed request answers `{"error": {"kind": …, "message": …}}` with a 4xx
//! or 5xx status. Handlers build it; the guard ([`crate::guard`]) turns every other error
//! response (axum's extractor rejections, 404, 405, 413, 415) into the same shape, so a client
//! always finds the message in one place.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::wire::{ErrorBody, ErrorDetail};

/// A failed request: its status, a short kind a program can match on, and a message for people.
#[derive(Debug)]
pub struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) kind: &'static str,
    pub(crate) message: String,
    pub(crate) retry_after_secs: Option<u64>,
}

/// The kind of a failed request, kept on its response for the request log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ErrorKind(pub(crate) &'static str);

impl ApiError {
    /// An error with `status`, `kind` and `message`.
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            message: message.into(),
            retry_after_secs: None,
        }
    }

    /// 400: the request itself is wrong.
    pub fn bad_request(kind: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, kind, message)
    }

    /// 503 with `Retry-After`: too busy now, try again later.
    pub fn busy(message: impl Into<String>, retry_after_secs: u64) -> Self {
        Self {
            retry_after_secs: Some(retry_after_secs),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, "busy", message)
        }
    }

    /// 500: the server failed.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// The kind a status has when nothing more specific is known.
    pub(crate) fn kind_of(status: StatusCode) -> &'static str {
        match status {
            StatusCode::BAD_REQUEST => "bad_request",
            StatusCode::UNAUTHORIZED => "unauthorized",
            StatusCode::FORBIDDEN => "forbidden",
            StatusCode::NOT_FOUND => "not_found",
            StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
            StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
            StatusCode::URI_TOO_LONG => "uri_too_long",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            StatusCode::MISDIRECTED_REQUEST => "misdirected_host",
            StatusCode::UNPROCESSABLE_ENTITY => "invalid_body",
            StatusCode::TOO_MANY_REQUESTS => "too_many_requests",
            StatusCode::SERVICE_UNAVAILABLE => "busy",
            s if s.is_client_error() => "client_error",
            _ => "internal",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                kind: self.kind.to_owned(),
                message: self.message,
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"percolator\""),
            );
        }
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response.extensions_mut().insert(ErrorKind(self.kind));
        response
    }
}

impl From<percolator_core::Error> for ApiError {
    fn from(e: percolator_core::Error) -> Self {
        match e {
            percolator_core::Error::InvalidInput(message) => {
                Self::bad_request("invalid_input", message)
            }
            other => Self::internal(other.to_string()),
        }
    }
}

impl From<percolator_webindex::LoadError> for ApiError {
    fn from(e: percolator_webindex::LoadError) -> Self {
        match e {
            percolator_webindex::LoadError::Txn(e) => e.into(),
            other => Self::bad_request("invalid_input", other.to_string()),
        }
    }
}
