//! The two Redis steps around the inner service, each one boxed future of the
//! [`IdempotencyFuture`](crate::idempotency::IdempotencyFuture): reading the request and beginning its
//! key; storing the response (or not) and ending the key.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::HeaderValue;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use lock_core::idempotency::{Begin, IdempotencyError, InFlight, Stored, StoredKind};
use lock_core::LockName;

use crate::idempotency::answer::{code, Answer, REPLAYED_HEADER};
use crate::idempotency::body::{collect, Buffered, Collected, IdempotencyBody, RebuildBody};
use crate::idempotency::config::{is_final_grpc, is_final_http, Config};
use crate::idempotency::record::StoredResponse;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the first step decided.
pub(crate) enum Prepared<B> {
    /// The key is in flight for this request: call the inner service.
    Run {
        in_flight: InFlight,
        request: Request<B>,
    },
    /// Answer without calling it: a replay or a refusal.
    Answer(Response<Buffered>),
}

/// Reads the body (up to the limit), fingerprints the request and begins its key.
pub(crate) async fn prepare<B>(
    config: Arc<Config>,
    name: LockName,
    parts: Parts,
    body: B,
    grpc: bool,
) -> Prepared<B>
where
    B: RebuildBody,
    B::Error: Into<BoxError>,
{
    let bytes = match Limited::new(body, config.max_request).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            let answer = if error.downcast_ref::<LengthLimitError>().is_some() {
                let limit = config.max_request;
                let text = format!("the request body is larger than {limit} bytes");
                Answer::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    code::RESOURCE_EXHAUSTED,
                    text,
                )
            } else {
                tracing::debug!(%error, "request body unreadable");
                let text = "the request body could not be read";
                Answer::new(StatusCode::BAD_REQUEST, code::INVALID_ARGUMENT, text)
            };
            return Prepared::Answer(answer.into_response(grpc));
        }
    };
    let fingerprint = (config.fingerprint)(&parts, &bytes);
    let mut idempotency = config.client.idempotency(name).retention(config.retention);
    if let Some(lease) = config.lease {
        idempotency = idempotency.lease(lease);
    }
    match idempotency.begin(&fingerprint).await {
        Ok(Begin::Run(in_flight)) => {
            let mut request = Request::from_parts(parts, B::rebuild(bytes));
            request.extensions_mut().insert(in_flight.guard().info());
            Prepared::Run { in_flight, request }
        }
        Ok(Begin::Replay(stored)) => Prepared::Answer(replay(stored, &config, grpc)),
        Err(error) => Prepared::Answer(refusal(&config, error).into_response(grpc)),
    }
}

/// The stored response, marked as a replay.
fn replay(stored: Stored, config: &Config, grpc: bool) -> Response<Buffered> {
    let mut response = match stored.kind() {
        StoredKind::Result => match StoredResponse::decode(stored.into_payload()) {
            Some(stored) => {
                let mut response = Response::new(Buffered {
                    data: stored.body,
                    trailers: stored.trailers,
                });
                *response.status_mut() = stored.status;
                *response.headers_mut() = stored.headers;
                response
            }
            None => {
                tracing::error!("a stored response could not be decoded");
                internal().into_response(grpc)
            }
        },
        _ => Answer::new(
            config.too_large,
            code::ALREADY_EXISTS,
            "the request with this idempotency key completed; its response was too large to keep",
        )
        .into_response(grpc),
    };
    let replayed = HeaderValue::from_static("true");
    response.headers_mut().insert(REPLAYED_HEADER, replayed);
    response
}

fn internal() -> Answer {
    let text = "the idempotency key could not be checked";
    Answer::new(StatusCode::INTERNAL_SERVER_ERROR, code::INTERNAL, text)
}

/// The answer to a key that cannot run: generic texts, the details to the log.
pub(crate) fn refusal(config: &Config, error: IdempotencyError) -> Answer {
    tracing::debug!(
        distlock.error.class = error.class(),
        error = error_text(config, &error),
        "idempotent request refused"
    );
    match &error {
        IdempotencyError::InFlight { source, .. } => {
            let after = config
                .holds
                .retry_after(source, Duration::from_secs(1), SystemTime::now());
            let text = "a request with this idempotency key is in flight";
            Answer::new(StatusCode::CONFLICT, code::ABORTED, text).retry_after(after)
        }
        IdempotencyError::Mismatch { .. } => Answer::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            code::FAILED_PRECONDITION,
            "this idempotency key was used for another request",
        ),
        IdempotencyError::Lost { .. } => Answer::new(
            StatusCode::SERVICE_UNAVAILABLE,
            code::ABORTED,
            "the request lost its idempotency key while it ran; nothing was stored",
        ),
        // As the lock layer's outage answer: the same `Retry-After`.
        _ if error.is_unavailable() => Answer::new(
            StatusCode::SERVICE_UNAVAILABLE,
            code::UNAVAILABLE,
            "idempotency keys are unavailable",
        )
        .retry_after(lock_core::Answer::UNAVAILABLE_RETRY_AFTER),
        _ => {
            tracing::error!(
                distlock.error.class = error.class(),
                error = error_text(config, &error),
                "idempotency key could not be checked"
            );
            internal()
        }
    }
}

/// Stores a final response and ends its key in one function call, or releases the key without
/// storing a transient one; answers what the client gets.
pub(crate) async fn finish<B>(
    config: Arc<Config>,
    in_flight: InFlight,
    response: Response<B>,
    grpc: bool,
) -> Response<IdempotencyBody<B>>
where
    B: Body<Data = Bytes>,
{
    let (parts, body) = response.into_parts();
    let status_header = parts.headers.get("grpc-status").map(HeaderValue::as_bytes);
    let transient = match (grpc, status_header) {
        (false, _) => !is_final_http(parts.status),
        (true, Some(code)) => !is_final_grpc(code),
        (true, None) => false,
    };
    if transient {
        release(&config, in_flight).await;
        return Response::from_parts(parts, IdempotencyBody::inner(body));
    }
    let collected = match collect(body, config.max_response).await {
        Ok(collected) => collected,
        Err(_) => {
            release(&config, in_flight).await;
            tracing::warn!("the response body failed: nothing stored");
            return internal()
                .into_response(grpc)
                .map(IdempotencyBody::buffered);
        }
    };
    let stored = match &collected {
        Collected::Whole(whole) => {
            let trailer = whole.trailers.as_ref().and_then(|t| t.get("grpc-status"));
            if grpc && trailer.is_some_and(|code| !is_final_grpc(code.as_bytes())) {
                release(&config, in_flight).await;
                return Response::from_parts(parts, collected.into_body());
            }
            let stored = StoredResponse {
                status: parts.status,
                headers: config.kept_headers(&parts.headers, grpc),
                body: whole.data.clone(),
                trailers: whole.trailers.clone(),
            };
            in_flight.complete(&stored.encode()).await
        }
        Collected::Over(..) => in_flight.complete_too_large(&[]).await,
    };
    match stored {
        Ok(()) => Response::from_parts(parts, collected.into_body()),
        Err(error @ IdempotencyError::Lost { .. }) => {
            tracing::warn!(
                distlock.error.class = error.class(),
                error = error_text(&config, &error),
                "a late completion was not stored"
            );
            refusal(&config, error)
                .into_response(grpc)
                .map(IdempotencyBody::buffered)
        }
        Err(error) => {
            // The work is done: its answer is worth more to the client than an error. The
            // key is free again once the lock's lease ends.
            log_failure(&config, &error, "the response could not be stored");
            Response::from_parts(parts, collected.into_body())
        }
    }
}

async fn release(config: &Config, in_flight: InFlight) {
    if let Err(error) = in_flight.release().await {
        log_failure(config, &error.into(), "releasing an idempotency key failed");
    }
}

/// Logs a failed step of one request: an outage only at debug level, as the lock client
/// logs it once for all requests; anything else as a warning.
fn log_failure(config: &Config, error: &IdempotencyError, what: &str) {
    let (class, text) = (error.class(), error_text(config, error));
    if error.is_unavailable() {
        tracing::debug!(distlock.error.class = class, error = text, "{what}");
    } else {
        tracing::warn!(distlock.error.class = class, error = text, "{what}");
    }
}

/// An error's text as a log field: it names the key, so only when the client opted in to
/// lock names ([`LockClient::traces_lock_names`](lock_core::LockClient::traces_lock_names));
/// its class is logged beside it always.
pub(crate) fn error_text<'e>(
    config: &Config,
    error: &'e IdempotencyError,
) -> Option<tracing::field::DisplayValue<&'e IdempotencyError>> {
    (config.client.traces_lock_names()).then(|| tracing::field::display(error))
}
