//! [`ResponseBody`]: the inner service's body, a rejection's text, or a custom answer's body.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt;
use pin_project_lite::pin_project;

use crate::response::BoxError;

pin_project! {
    /// The response body of [`DistributedLock`](crate::lock::DistributedLock): the inner service's
    /// body, or the text of a rejection.
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Rejection { data: Option<Bytes> },
        Custom { #[pin] body: CustomBody },
    }
}

/// The body of a [custom rejection](crate::lock::LockLayerBuilder::on_rejection), boxed: its type
/// is the application's.
pub(crate) type CustomBody = UnsyncBoxBody<Bytes, BoxError>;

/// Boxes a custom rejection's body.
pub(crate) fn custom_body<B>(body: B) -> CustomBody
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    body.map_err(Into::into).boxed_unsync()
}

impl<B> ResponseBody<B> {
    /// Wraps a body of the inner service.
    pub fn new(body: B) -> Self {
        Self {
            kind: Kind::Inner { body },
        }
    }

    pub(crate) fn custom(body: CustomBody) -> Self {
        Self {
            kind: Kind::Custom { body },
        }
    }

    pub(crate) fn rejection(text: String) -> Self {
        let data = (!text.is_empty()).then(|| Bytes::from(text));
        Self {
            kind: Kind::Rejection { data },
        }
    }
}

impl<B: fmt::Debug> fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Inner { body } => f.debug_tuple("ResponseBody").field(body).finish(),
            Kind::Rejection { data } => f.debug_tuple("ResponseBody").field(data).finish(),
            Kind::Custom { .. } => f.debug_tuple("ResponseBody").field(&"custom").finish(),
        }
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    /// Boxed: the inner service's errors or a custom rejection body's.
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.project().kind.project() {
            KindProj::Inner { body } => body.poll_frame(cx).map_err(Into::into),
            KindProj::Rejection { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            KindProj::Custom { body } => body.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Rejection { data } => data.is_none(),
            Kind::Custom { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Custom { body } => body.size_hint(),
            Kind::Rejection { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}

/// Turns a rejection answer into a response of the service's body type.
pub(crate) fn into_response<B>(response: Response<String>) -> Response<ResponseBody<B>> {
    response.map(ResponseBody::rejection)
}
