//! Bodies: the request body rebuilt after it was buffered ([`RebuildBody`]), the response
//! body ([`IdempotencyBody`]) and the buffering of a response up to the store limit.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use pin_project_lite::pin_project;

/// A request body the layer can rebuild from the bytes it read: the layer reads the body
/// to fingerprint it, then passes the same bytes on to the inner service.
///
/// Implemented for axum's body (`axum` feature), tonic's body (`tonic` feature) and
/// `http_body_util::Full<Bytes>`; implement it for your own body type.
#[diagnostic::on_unimplemented(
    message = "the idempotency layer cannot rebuild a request body of type `{Self}`",
    note = "lock-tower's `axum` feature implements `RebuildBody` for axum's body, its `tonic` feature for tonic's (neither is on by default)"
)]
pub trait RebuildBody: Body + Sized {
    /// The body of `bytes`.
    fn rebuild(bytes: Bytes) -> Self;
}

/// Available with the crate feature `axum`.
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
impl RebuildBody for axum::body::Body {
    fn rebuild(bytes: Bytes) -> Self {
        Self::from(bytes)
    }
}

/// Available with the crate feature `tonic`.
#[cfg(feature = "tonic")]
#[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
impl RebuildBody for tonic::body::Body {
    fn rebuild(bytes: Bytes) -> Self {
        Self::new(http_body_util::Full::new(bytes))
    }
}

impl RebuildBody for http_body_util::Full<Bytes> {
    fn rebuild(bytes: Bytes) -> Self {
        Self::new(bytes)
    }
}

/// A body the layer made: data, then trailers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Buffered {
    pub(crate) data: Bytes,
    pub(crate) trailers: Option<HeaderMap>,
}

pin_project! {
    /// The response body of [`Idempotent`](crate::idempotency::Idempotent): the inner service's body as
    /// it streams, a stored response being replayed, one that was buffered to be stored, or
    /// an answer of the layer.
    pub struct IdempotencyBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Buffered { data: Option<Bytes>, trailers: Option<HeaderMap> },
        // A response over the store limit: what was read, then the rest as it streams.
        Prefixed { data: Option<Bytes>, #[pin] rest: Pin<Box<B>> },
    }
}

impl<B> IdempotencyBody<B> {
    pub(crate) fn inner(body: B) -> Self {
        Self {
            kind: Kind::Inner { body },
        }
    }

    pub(crate) fn buffered(buffered: Buffered) -> Self {
        let data = (!buffered.data.is_empty()).then_some(buffered.data);
        Self {
            kind: Kind::Buffered {
                data,
                trailers: buffered.trailers,
            },
        }
    }

    fn prefixed(data: Bytes, rest: Pin<Box<B>>) -> Self {
        Self {
            kind: Kind::Prefixed {
                data: Some(data),
                rest,
            },
        }
    }
}

impl<B: Body<Data = Bytes>> Body for IdempotencyBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner { body } => body.poll_frame(cx),
            KindProj::Buffered { data, trailers } => Poll::Ready(
                data.take()
                    .map(Frame::data)
                    .or_else(|| trailers.take().map(Frame::trailers))
                    .map(Ok),
            ),
            KindProj::Prefixed { data, rest } => match data.take() {
                Some(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
                None => rest.poll_frame(cx),
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Buffered { data, trailers } => data.is_none() && trailers.is_none(),
            Kind::Prefixed { .. } => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Buffered { data, .. } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            Kind::Prefixed { data, rest } => {
                let read = data.as_ref().map_or(0, |d| d.len() as u64);
                let rest = rest.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(rest.lower() + read);
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper + read);
                }
                hint
            }
        }
    }
}

impl<B> fmt::Debug for IdempotencyBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Inner { .. } => "Inner",
            Kind::Buffered { .. } => "Buffered",
            Kind::Prefixed { .. } => "Prefixed",
        };
        f.debug_struct("IdempotencyBody")
            .field("kind", &kind)
            .finish()
    }
}

/// A response body read up to the store limit.
pub(crate) enum Collected<B> {
    /// All of it.
    Whole(Buffered),
    /// More than the limit: what was read, and the rest.
    Over(Bytes, Pin<Box<B>>),
}

impl<B> Collected<B> {
    pub(crate) fn into_body(self) -> IdempotencyBody<B> {
        match self {
            Self::Whole(buffered) => IdempotencyBody::buffered(buffered),
            Self::Over(data, rest) => IdempotencyBody::prefixed(data, rest),
        }
    }
}

/// Reads `body` until its end or until more than `limit` bytes of data came.
pub(crate) async fn collect<B: Body<Data = Bytes>>(
    body: B,
    limit: usize,
) -> Result<Collected<B>, B::Error> {
    let mut body = Box::pin(body);
    let mut data = BytesMut::new();
    let mut trailers: Option<HeaderMap> = None;
    while let Some(frame) = body.frame().await {
        let frame = match frame?.into_data() {
            Ok(chunk) => {
                data.extend_from_slice(&chunk);
                if data.len() > limit {
                    return Ok(Collected::Over(data.freeze(), body));
                }
                continue;
            }
            Err(frame) => frame,
        };
        if let Ok(more) = frame.into_trailers() {
            trailers.get_or_insert_with(HeaderMap::new).extend(more);
        }
    }
    Ok(Collected::Whole(Buffered {
        data: data.freeze(),
        trailers,
    }))
}
