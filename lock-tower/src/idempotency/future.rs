//! [`IdempotencyFuture`]: the future of [`Idempotent`](crate::idempotency::Idempotent).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use http::{Request, Response};
use lock_core::idempotency::{IdempotencyError, InFlight};
use lock_core::Lost;
use pin_project_lite::pin_project;
use tower_service::Service;

use crate::idempotency::body::{Buffered, IdempotencyBody};
use crate::idempotency::config::Config;
use crate::idempotency::steps::{refusal, Prepared};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

pin_project! {
    /// The response future of [`Idempotent`](crate::idempotency::Idempotent).
    ///
    /// A state machine: the first step (reading the body, beginning the key) and the last
    /// (storing the response and ending the key) are one boxed future each; between them
    /// the inner service's future runs with the in-flight hold and its lost watch as fields.
    /// A loss drops the inner future and answers `503` / `ABORTED`; dropping this future
    /// drops the hold, which releases the key in the background and stores nothing.
    pub struct IdempotencyFuture<S, ReqBody, ResBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        state: State<S, ReqBody, ResBody>,
    }
}

pin_project! {
    #[project = StateProj]
    #[project_replace = StateOwn]
    enum State<S, ReqBody, ResBody>
    where
        S: Service<Request<ReqBody>>,
    {
        Preparing {
            prepare: BoxFuture<Prepared<ReqBody>>,
            service: S,
            config: Arc<Config>,
            grpc: bool,
        },
        Calling {
            #[pin]
            future: S::Future,
            in_flight: InFlight,
            #[pin]
            lost: Lost,
            since: Instant,
            config: Arc<Config>,
            grpc: bool,
        },
        Finishing {
            finish: BoxFuture<Response<IdempotencyBody<ResBody>>>,
        },
        Passing {
            #[pin]
            future: S::Future,
        },
        Answered {
            response: Response<Buffered>,
        },
        Done,
    }
}

impl<S, ReqBody, ResBody> IdempotencyFuture<S, ReqBody, ResBody>
where
    S: Service<Request<ReqBody>>,
{
    pub(crate) fn preparing(
        prepare: BoxFuture<Prepared<ReqBody>>,
        service: S,
        config: Arc<Config>,
        grpc: bool,
    ) -> Self {
        Self {
            state: State::Preparing {
                prepare,
                service,
                config,
                grpc,
            },
        }
    }

    pub(crate) fn passing(future: S::Future) -> Self {
        Self {
            state: State::Passing { future },
        }
    }

    pub(crate) fn answered(response: Response<Buffered>) -> Self {
        Self {
            state: State::Answered { response },
        }
    }
}

const POLLED_AFTER_COMPLETION: &str = "IdempotencyFuture polled after completion";

impl<S, ReqBody, ResBody> Future for IdempotencyFuture<S, ReqBody, ResBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    ResBody::Error: Send,
{
    type Output = Result<Response<IdempotencyBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Preparing { prepare, .. } => {
                    let prepared = ready!(prepare.as_mut().poll(cx));
                    let StateOwn::Preparing {
                        mut service,
                        config,
                        grpc,
                        ..
                    } = state.as_mut().project_replace(State::Done)
                    else {
                        unreachable!()
                    };
                    match prepared {
                        Prepared::Run { in_flight, request } => {
                            let lost = in_flight.lost();
                            // The service was driven to readiness before `Idempotent::call`.
                            let future = service.call(request);
                            state.set(State::Calling {
                                future,
                                in_flight,
                                lost,
                                since: Instant::now(),
                                config,
                                grpc,
                            });
                        }
                        Prepared::Answer(response) => state.set(State::Answered { response }),
                    }
                }
                StateProj::Calling {
                    future,
                    lost,
                    in_flight,
                    config,
                    grpc,
                    ..
                } => {
                    // The work first: a response that is ready wins over a loss seen late
                    // (the store then checks the hold in Redis).
                    if let Poll::Ready(output) = future.poll(cx) {
                        let StateOwn::Calling {
                            in_flight,
                            since,
                            config,
                            grpc,
                            ..
                        } = state.as_mut().project_replace(State::Done)
                        else {
                            unreachable!()
                        };
                        config.holds.record(since.elapsed());
                        // An error of the service drops the hold: released, nothing stored.
                        let response = output?;
                        let finish =
                            crate::idempotency::steps::finish(config, in_flight, response, grpc);
                        state.set(State::Finishing {
                            finish: Box::pin(finish),
                        });
                        continue;
                    }
                    ready!(lost.poll(cx));
                    let key = in_flight.guard().name().clone();
                    let names = config.client.traces_lock_names();
                    tracing::warn!(
                        key = names.then(|| tracing::field::display(&key)),
                        "idempotency key lost while its request ran: aborted"
                    );
                    let answer = refusal(config, IdempotencyError::Lost { key });
                    let response = answer.into_response(*grpc);
                    // Drops the inner future, then the hold (whose end is known).
                    state.set(State::Done);
                    return Poll::Ready(Ok(response.map(IdempotencyBody::buffered)));
                }
                StateProj::Finishing { finish } => {
                    let response = ready!(finish.as_mut().poll(cx));
                    state.set(State::Done);
                    return Poll::Ready(Ok(response));
                }
                StateProj::Passing { future } => {
                    let output = ready!(future.poll(cx));
                    state.set(State::Done);
                    return Poll::Ready(output.map(|r| r.map(IdempotencyBody::inner)));
                }
                StateProj::Answered { .. } => {
                    let StateOwn::Answered { response } =
                        state.as_mut().project_replace(State::Done)
                    else {
                        unreachable!()
                    };
                    return Poll::Ready(Ok(response.map(IdempotencyBody::buffered)));
                }
                StateProj::Done => panic!("{POLLED_AFTER_COMPLETION}"),
            }
        }
    }
}

impl<S, ReqBody, ResBody> fmt::Debug for IdempotencyFuture<S, ReqBody, ResBody>
where
    S: Service<Request<ReqBody>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Preparing { .. } => "Preparing",
            State::Calling { .. } => "Calling",
            State::Finishing { .. } => "Finishing",
            State::Passing { .. } => "Passing",
            State::Answered { .. } => "Answered",
            State::Done => "Done",
        };
        f.debug_struct("IdempotencyFuture")
            .field("state", &state)
            .finish()
    }
}
