//! [`ResponseFuture`]: the future of [`DistributedLock`](crate::lock::DistributedLock).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use http::{Request, Response};
use lock_core::{GuardedRun, InScope, LockGuard, LockRequest, OwnerScope};
use pin_project_lite::pin_project;
use tower_service::Service;

use crate::lock::config::{Config, OutagePolicy};
use crate::response::{Rejection, ResponseBody};

pin_project! {
    /// The response future of [`DistributedLock`](crate::lock::DistributedLock).
    ///
    /// A state machine: for a locked request it takes the lock in the request's owner scope,
    /// then drives lock-core's [`GuardedRun`] in that scope — the inner service's future
    /// with the lock's guard as a field, aborted if the lock is lost, the lock released
    /// before the response is handed on. Dropping it (a client that
    /// disconnected, a timeout layer that gave up) drops the inner future and the guard,
    /// which releases the lock at once in the background. Only the acquisition is boxed;
    /// requests that match no route, or whose key is invalid, allocate nothing.
    pub struct ResponseFuture<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        state: State<S, ReqBody>,
    }
}

pin_project! {
    #[project = StateProj]
    #[project_replace = StateOwn]
    enum State<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        // Not polled yet: the owner scope is chosen at the first poll, where the request runs
        // (a lock layer nested in another one's inner service joins the outer scope).
        Start {
            lock: LockRequest,
            service: S,
            request: Request<ReqBody>,
            config: Arc<Config>,
            grpc: bool,
        },
        Acquiring {
            #[pin]
            acquire: InScope<LockRequest>,
            // When the acquisition began: its wait goes on the request's span.
            started: Instant,
            scope: OwnerScope,
            service: S,
            request: Request<ReqBody>,
            config: Arc<Config>,
            grpc: bool,
        },
        Running {
            #[pin]
            run: InScope<GuardedRun<LockGuard, Call<S, Request<ReqBody>>>>,
            // When the lock was taken: the hold time feeds `Retry-After`.
            since: Instant,
            config: Arc<Config>,
            grpc: bool,
        },
        Unlocked {
            #[pin]
            future: S::Future,
        },
        Rejected {
            rejection: Rejection,
            config: Arc<Config>,
        },
        Done,
    }
}

impl<S, ReqBody> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    pub(crate) fn locked(
        lock: LockRequest,
        service: S,
        request: Request<ReqBody>,
        config: Arc<Config>,
        grpc: bool,
    ) -> Self {
        Self {
            state: State::Start {
                lock,
                service,
                request,
                config,
                grpc,
            },
        }
    }

    pub(crate) fn unlocked(future: S::Future) -> Self {
        Self {
            state: State::Unlocked { future },
        }
    }

    pub(crate) fn rejected(rejection: Rejection, config: Arc<Config>) -> Self {
        Self {
            state: State::Rejected { rejection, config },
        }
    }
}

const POLLED_AFTER_COMPLETION: &str = "ResponseFuture polled after completion";

impl<S, ReqBody, ResBody> Future for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Output = Result<Response<ResponseBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let wrap = |r: Response<ResBody>| r.map(ResponseBody::new);
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Start { .. } => {
                    let StateOwn::Start {
                        lock,
                        service,
                        request,
                        config,
                        grpc,
                    } = state.as_mut().project_replace(State::Done)
                    else {
                        unreachable!()
                    };
                    let scope = OwnerScope::current_or_new();
                    // In the scope: a handler that takes the same lock re-enters it.
                    let acquire = scope.clone().enter(lock);
                    state.set(State::Acquiring {
                        acquire,
                        started: Instant::now(),
                        scope,
                        service,
                        request,
                        config,
                        grpc,
                    });
                }
                StateProj::Acquiring {
                    acquire, started, ..
                } => {
                    let acquired = ready!(acquire.poll(cx));
                    super::trace::acquired(&acquired, started.elapsed());
                    let StateOwn::Acquiring {
                        scope,
                        mut service,
                        mut request,
                        config,
                        grpc,
                        ..
                    } = state.as_mut().project_replace(State::Done)
                    else {
                        unreachable!()
                    };
                    match acquired {
                        Ok(guard) => {
                            request.extensions_mut().insert(guard.info());
                            let call = Call::Pending { service, request };
                            state.set(State::Running {
                                run: scope.enter(guard.run(config.on_lost, call)),
                                since: Instant::now(),
                                config,
                                grpc,
                            });
                        }
                        Err(error)
                            if error.is_unavailable()
                                && config.outage == OutagePolicy::FailOpen =>
                        {
                            // Debug only: the lock client logs the outage once, not
                            // once per request.
                            let names = config.client.traces_lock_names();
                            tracing::debug!(
                                distlock.lock.template = &*config.family,
                                distlock.error.class = error.class(),
                                error = names.then(|| tracing::field::display(&error)),
                                "redis is unavailable: calling the service without the lock \
                                 (fail open)"
                            );
                            let future = service.call(request);
                            state.set(State::Unlocked { future });
                        }
                        Err(error) => {
                            let rejection = config.lock_rejection(error, grpc);
                            return Poll::Ready(Ok(config.reject(&rejection)));
                        }
                    }
                }
                StateProj::Running {
                    run,
                    since,
                    config,
                    grpc,
                } => {
                    let outcome = ready!(run.poll(cx));
                    let answer = match outcome {
                        Ok(output) => {
                            config.holds.record(since.elapsed());
                            output.map(wrap)
                        }
                        // Lost under `OnLost::Abort`: the inner future is dropped.
                        Err(error) => Ok(config.reject(&config.lock_rejection(error, *grpc))),
                    };
                    state.set(State::Done);
                    return Poll::Ready(answer);
                }
                StateProj::Unlocked { future } => {
                    let output = ready!(future.poll(cx));
                    state.set(State::Done);
                    return Poll::Ready(output.map(wrap));
                }
                StateProj::Rejected { .. } => {
                    let StateOwn::Rejected { rejection, config } =
                        state.as_mut().project_replace(State::Done)
                    else {
                        unreachable!()
                    };
                    return Poll::Ready(Ok(config.reject(&rejection)));
                }
                StateProj::Done => panic!("{POLLED_AFTER_COMPLETION}"),
            }
        }
    }
}

impl<S, ReqBody> fmt::Debug for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Start { .. } => "Start",
            State::Acquiring { .. } => "Acquiring",
            State::Running { .. } => "Running",
            State::Unlocked { .. } => "Unlocked",
            State::Rejected { .. } => "Rejected",
            State::Done => "Done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}

pin_project! {
    /// The inner service's call, made at the first poll: inside the owner scope and with
    /// the current lock set, as the call and its future ran before.
    #[project = CallProj]
    #[project_replace = CallOwn]
    enum Call<S, Req>
    where
        S: Service<Req>,
    {
        Pending { service: S, request: Req },
        Called { #[pin] future: S::Future },
        Taken,
    }
}

impl<S: Service<Req>, Req> Future for Call<S, Req> {
    type Output = Result<S::Response, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let CallProj::Pending { .. } = self.as_mut().project() {
            let CallOwn::Pending {
                mut service,
                request,
            } = self.as_mut().project_replace(Call::Taken)
            else {
                unreachable!()
            };
            // The service was driven to readiness before `DistributedLock::call`.
            let future = service.call(request);
            self.as_mut().set(Call::Called { future });
        }
        match self.project() {
            CallProj::Called { future } => future.poll(cx),
            _ => panic!("{POLLED_AFTER_COMPLETION}"),
        }
    }
}
