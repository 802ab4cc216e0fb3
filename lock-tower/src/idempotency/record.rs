//! A stored response: status, the headers the layer keeps, the body and the trailers, as
//! the payload of lock-core's idempotency record.
//!
//! Layout (big-endian): status `u16`; header count `u16`, then per header name length
//! `u16`, name, value length `u32`, value; trailer count `u16` (`0xFFFF`: no trailers
//! frame), trailers as headers; then the body to the end.

use bytes::{Buf, BufMut, Bytes};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

const NO_TRAILERS: u16 = u16::MAX;

/// A response as the layer stores and replays it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StoredResponse {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    pub(crate) trailers: Option<HeaderMap>,
}

impl StoredResponse {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.body.len() + 256);
        out.put_u16(self.status.as_u16());
        put_headers(&mut out, &self.headers);
        match &self.trailers {
            Some(trailers) => put_headers(&mut out, trailers),
            None => out.put_u16(NO_TRAILERS),
        }
        out.extend_from_slice(&self.body);
        out
    }

    /// `None` for a payload this layer did not write.
    pub(crate) fn decode(payload: Vec<u8>) -> Option<Self> {
        let mut buf = Bytes::from(payload);
        let status = StatusCode::from_u16(get_u16(&mut buf)?).ok()?;
        let count = get_u16(&mut buf)?;
        let headers = get_headers(&mut buf, count)?;
        let trailers = match get_u16(&mut buf)? {
            NO_TRAILERS => None,
            count => Some(get_headers(&mut buf, count)?),
        };
        Some(Self {
            status,
            headers,
            body: buf,
            trailers,
        })
    }
}

fn put_headers(out: &mut Vec<u8>, headers: &HeaderMap) {
    // Header maps of responses stay far below 65535 entries; the rest would be cut.
    let count = headers.len().min(usize::from(NO_TRAILERS - 1));
    out.put_u16(count as u16);
    for (name, value) in headers.iter().take(count) {
        out.put_u16(name.as_str().len() as u16);
        out.extend_from_slice(name.as_str().as_bytes());
        out.put_u32(value.len() as u32);
        out.extend_from_slice(value.as_bytes());
    }
}

fn get_u16(buf: &mut Bytes) -> Option<u16> {
    (buf.remaining() >= 2).then(|| buf.get_u16())
}

fn get_slice(buf: &mut Bytes, len: usize) -> Option<Bytes> {
    (buf.remaining() >= len).then(|| buf.split_to(len))
}

fn get_headers(buf: &mut Bytes, count: u16) -> Option<HeaderMap> {
    let mut headers = HeaderMap::with_capacity(usize::from(count));
    for _ in 0..count {
        let len = usize::from(get_u16(buf)?);
        let name = HeaderName::from_bytes(&get_slice(buf, len)?).ok()?;
        let len = (buf.remaining() >= 4).then(|| buf.get_u32())? as usize;
        let value = HeaderValue::from_maybe_shared(get_slice(buf, len)?).ok()?;
        headers.append(name, value);
    }
    Some(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_round_trip_with_binary_bodies_and_trailers() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/grpc"));
        headers.append("x-a", HeaderValue::from_static("1"));
        headers.append("x-a", HeaderValue::from_static("2"));
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", HeaderValue::from_static("0"));
        for (body, trailers) in [
            (Bytes::new(), None),
            (
                Bytes::from_static(b"\0\xff\x80binary"),
                Some(trailers.clone()),
            ),
            (Bytes::from(vec![7; 70_000]), Some(HeaderMap::new())),
        ] {
            let response = StoredResponse {
                status: StatusCode::CREATED,
                headers: headers.clone(),
                body,
                trailers,
            };
            let decoded = StoredResponse::decode(response.encode()).unwrap();
            assert_eq!(decoded, response);
        }
        assert_eq!(StoredResponse::decode(vec![0, 200, 0]), None);
        assert_eq!(StoredResponse::decode(vec![]), None);
    }
}
