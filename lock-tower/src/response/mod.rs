//! What the layers answer when they answer a request themselves: the [`Rejection`]s of the
//! lock and semaphore layers, their gRPC form, and the [`ResponseBody`] that carries either
//! the inner service's body or a rejection. Shared by every middleware of the crate (the
//! idempotency layer answers through [`grpc_status`] too).

mod body;
mod grpc;
mod rejection;

pub use body::ResponseBody;
pub(crate) use body::{custom_body, into_response, CustomBody};
pub(crate) use grpc::{grpc_status, is_grpc};
pub use rejection::{BoxError, Rejection, RejectionKind};
