//! gRPC on the wire: recognising a gRPC request, and trailers-only answers.

use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Request, Response};

/// A trailers-only gRPC response with `code` and `message`.
pub(crate) fn grpc_status(code: i32, message: &str) -> Response<String> {
    let mut response = Response::new(String::new());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert("grpc-status", HeaderValue::from(code));
    if let Ok(value) = HeaderValue::try_from(encode_grpc_message(message)) {
        headers.insert("grpc-message", value);
    }
    response
}

/// Percent-encodes a `grpc-message` as the gRPC HTTP/2 spec asks (all but printable ASCII
/// other than `%`).
fn encode_grpc_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for b in message.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// True for gRPC requests: `content-type: application/grpc` (also `+proto` and friends).
pub(crate) fn is_grpc<B>(request: &Request<B>) -> bool {
    request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_is_detected_by_content_type() {
        let grpc = Request::post("/")
            .header(CONTENT_TYPE, "application/grpc+proto")
            .body(())
            .unwrap();
        assert!(is_grpc(&grpc));
        assert!(!is_grpc(&Request::new(())));
    }

    #[test]
    fn grpc_messages_are_percent_encoded() {
        assert_eq!(encode_grpc_message("é%\n"), "%C3%A9%25%0A");
    }
}
