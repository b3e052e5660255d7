//! [`BreakerLayer`] and [`HttpBreakerLayer`].

use tower_layer::Layer;

use crate::{
    BreakerHandle, BreakerService, CircuitBreaker, DefaultClassifier, HttpBreakerService,
    McpClassifier,
};

/// Wraps a service in a [`BreakerService`]: an open breaker fails calls fast with
/// [`BreakerError::Open`](crate::BreakerError::Open). For client stacks (any request and response
/// type). Every service the layer makes shares the layer's [`CircuitBreaker`].
///
/// See the [crate docs](crate) for an example.
#[derive(Debug, Clone)]
pub struct BreakerLayer<C = DefaultClassifier> {
    breaker: CircuitBreaker,
    classifier: C,
}

impl BreakerLayer {
    /// A layer over `breaker` with the [`DefaultClassifier`] (`Err` = failure).
    pub fn new(breaker: CircuitBreaker) -> Self {
        Self {
            breaker,
            classifier: DefaultClassifier,
        }
    }
}

impl<C> BreakerLayer<C> {
    /// Replaces the classifier (any [`Classify`](crate::Classify), e.g. a closure or
    /// [`McpClassifier`]).
    #[must_use]
    pub fn classifier<C2>(self, classifier: C2) -> BreakerLayer<C2> {
        BreakerLayer {
            breaker: self.breaker,
            classifier,
        }
    }

    /// The shared breaker.
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.breaker
    }

    /// An operator handle for the shared breaker.
    pub fn handle(&self) -> BreakerHandle {
        self.breaker.handle()
    }
}

impl<S, C: Clone> Layer<S> for BreakerLayer<C> {
    type Service = BreakerService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        BreakerService::new(inner, self.breaker.clone()).with_classifier(self.classifier.clone())
    }
}

/// Wraps an HTTP service in an [`HttpBreakerService`]: an open breaker answers
/// `503 Service Unavailable` with `Retry-After` and a JSON-RPC error body, keeping the inner
/// service's error type (works under axum and hyper as is). Every service the layer makes shares
/// the layer's [`CircuitBreaker`].
#[derive(Debug, Clone)]
pub struct HttpBreakerLayer<C = McpClassifier> {
    breaker: CircuitBreaker,
    classifier: C,
}

impl HttpBreakerLayer {
    /// A layer over `breaker` with the [`McpClassifier`].
    pub fn new(breaker: CircuitBreaker) -> Self {
        Self {
            breaker,
            classifier: McpClassifier,
        }
    }
}

impl<C> HttpBreakerLayer<C> {
    /// Replaces the classifier.
    #[must_use]
    pub fn classifier<C2>(self, classifier: C2) -> HttpBreakerLayer<C2> {
        HttpBreakerLayer {
            breaker: self.breaker,
            classifier,
        }
    }

    /// The shared breaker.
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.breaker
    }

    /// An operator handle for the shared breaker.
    pub fn handle(&self) -> BreakerHandle {
        self.breaker.handle()
    }
}

impl<S, C: Clone> Layer<S> for HttpBreakerLayer<C> {
    type Service = HttpBreakerService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        HttpBreakerService::new(inner, self.breaker.clone())
            .with_classifier(self.classifier.clone())
    }
}
