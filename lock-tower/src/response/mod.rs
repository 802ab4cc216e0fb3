//! What the layers answer when they answer a request themselves: the [`Rejection`]s of the
//! lock and semaphore layers, their gRPC form, and the [`ResponseBody`] that carries either
//! the inner service's body or a rejection. Shared by every middleware of the crate (the
//! idempotency layer answers through [`grpc_status`] too).

#[cfg(feature = "lock")]
mod body;
mod grpc;
#[cfg(feature = "lock")]
mod rejection;

#[cfg(feature = "lock")]
pub use body::ResponseBody;
#[cfg(feature = "lock")]
pub(crate) use body::{custom_body, into_response, CustomBody};
pub(crate) use grpc::{grpc_status, is_grpc};
#[cfg(feature = "lock")]
pub use rejection::{BoxError, Rejection, RejectionKind};
