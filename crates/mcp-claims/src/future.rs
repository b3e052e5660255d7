//! [`ResponseFuture`], the response future of [`ClaimsService`](crate::ClaimsService).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
#[cfg(feature = "jwks")]
use std::sync::Arc;
#[cfg(feature = "jwks")]
use std::task::ready;
use std::task::{Context, Poll};

use http::{Request, Response};
use mcp_core::ResponseBody;
use pin_project_lite::pin_project;
use tower_service::Service;

#[cfg(feature = "jwks")]
use crate::claims::Claims;
#[cfg(feature = "jwks")]
use crate::error::AuthError;
#[cfg(feature = "jwks")]
use crate::service::Current;

/// The boxed validation of a request that waits for a JWKS fetch (rare: first use, unknown `kid`).
#[cfg(feature = "jwks")]
pub(crate) type Validation = Pin<Box<dyn Future<Output = Result<Claims, AuthError>> + Send>>;

pin_project! {
    /// Response future of [`ClaimsService`](crate::ClaimsService).
    ///
    /// Either the inner service's future, a locally generated refusal, or (when the issuer's JWKS
    /// has to be fetched first) a validation step followed by the inner call.
    pub struct ResponseFuture<S, ReqBody, ResBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        kind: Kind<S, ReqBody, ResBody>,
    }
}

// pin-project-lite leaves a variant's attributes out of the projection, so a `#[cfg]` on
// `Validating` cannot work: the enum is spelled out once per configuration.
#[cfg(feature = "jwks")]
pin_project! {
    #[project = KindProj]
    enum Kind<S, ReqBody, ResBody>
    where
        S: Service<Request<ReqBody>>,
    {
        Validating {
            validation: Validation,
            request: Option<Request<ReqBody>>,
            inner: Option<S>,
            current: Arc<Current>,
        },
        Called {
            #[pin]
            future: S::Future,
        },
        Rejected {
            response: Option<Response<ResponseBody<ResBody>>>,
        },
    }
}

#[cfg(not(feature = "jwks"))]
pin_project! {
    #[project = KindProj]
    enum Kind<S, ReqBody, ResBody>
    where
        S: Service<Request<ReqBody>>,
    {
        Called {
            #[pin]
            future: S::Future,
        },
        Rejected {
            response: Option<Response<ResponseBody<ResBody>>>,
        },
    }
}

impl<S, ReqBody, ResBody> ResponseFuture<S, ReqBody, ResBody>
where
    S: Service<Request<ReqBody>>,
{
    pub(crate) fn called(future: S::Future) -> Self {
        Self {
            kind: Kind::Called { future },
        }
    }

    pub(crate) fn rejected(response: Response<ResponseBody<ResBody>>) -> Self {
        Self {
            kind: Kind::Rejected {
                response: Some(response),
            },
        }
    }

    #[cfg(feature = "jwks")]
    pub(crate) fn validating(
        validation: Validation,
        request: Request<ReqBody>,
        inner: S,
        current: Arc<Current>,
    ) -> Self {
        Self {
            kind: Kind::Validating {
                validation,
                request: Some(request),
                inner: Some(inner),
                current,
            },
        }
    }
}

impl<S, ReqBody, ResBody> Future for ResponseFuture<S, ReqBody, ResBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Output = Result<Response<ResponseBody<ResBody>>, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.as_mut().project();
        match this.kind.as_mut().project() {
            #[cfg(feature = "jwks")]
            KindProj::Validating {
                validation,
                request,
                inner,
                current,
            } => {
                let result = ready!(validation.as_mut().poll(cx));
                let request = request.take().expect("future polled after completion");
                let (mut parts, body) = request.into_parts();
                let next = match result {
                    Ok(claims) => {
                        current.authenticate(&mut parts, claims);
                        let mut inner = inner.take().expect("future polled after completion");
                        Kind::Called {
                            future: inner.call(Request::from_parts(parts, body)),
                        }
                    }
                    Err(error) => Kind::Rejected {
                        response: Some(current.reject(&error, &parts)),
                    },
                };
                this.kind.set(next);
                // Once: the next state is `Called` or `Rejected`.
                self.poll(cx)
            }
            KindProj::Called { future } => future
                .poll(cx)
                .map(|result| result.map(|response| response.map(ResponseBody::inner))),
            KindProj::Rejected { response } => {
                Poll::Ready(Ok(response.take().expect("future polled after completion")))
            }
        }
    }
}

impl<S, ReqBody, ResBody> fmt::Debug for ResponseFuture<S, ReqBody, ResBody>
where
    S: Service<Request<ReqBody>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.kind {
            #[cfg(feature = "jwks")]
            Kind::Validating { .. } => "Validating",
            Kind::Called { .. } => "Called",
            Kind::Rejected { .. } => "Rejected",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
