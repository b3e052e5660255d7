//! [`ClaimsLayer`]: wraps a service in [`ClaimsService`].

use std::sync::Arc;

use http::request::Parts;
use tower_layer::Layer;

use crate::challenge::{MakeResourceMetadata, ResourceMetadata};
use crate::service::{ClaimsService, Shared};
use crate::validator::JwtValidator;

/// Layer that authenticates requests with a bearer JWT; see the [crate docs](crate) for the
/// responses and an example.
///
/// Cheap to clone; every service it makes shares the validator (and its JWKS caches).
#[derive(Clone, Debug)]
#[must_use]
pub struct ClaimsLayer {
    shared: Arc<Shared>,
}

impl ClaimsLayer {
    /// A layer validating with `validator`, without a `resource_metadata` challenge parameter.
    pub fn new(validator: JwtValidator) -> Self {
        Self {
            shared: Arc::new(Shared::new(validator, ResourceMetadata::None)),
        }
    }

    /// Advertises the same RFC 9728 protected-resource-metadata URL in every challenge
    /// (`, resource_metadata="<url>"`). `"` and `\` are escaped; a URL that cannot be a header
    /// value (control characters) is left out.
    pub fn resource_metadata(self, url: impl Into<String>) -> Self {
        let url: String = url.into();
        self.with_metadata(ResourceMetadata::Fixed(Arc::from(url)))
    }

    /// Computes the protected-resource-metadata URL per request from its head (e.g. from a
    /// `mcp_core::VirtualHostId` extension); `None` leaves the parameter out.
    pub fn resource_metadata_fn<F>(self, make: F) -> Self
    where
        F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    {
        self.resource_metadata_with(make)
    }

    /// Like [`resource_metadata_fn`](Self::resource_metadata_fn), for any [`MakeResourceMetadata`].
    pub fn resource_metadata_with(self, make: impl MakeResourceMetadata) -> Self {
        self.with_metadata(ResourceMetadata::Dynamic(Arc::new(make)))
    }

    /// The validator the layer uses now.
    pub fn validator(&self) -> JwtValidator {
        self.shared.current().validator.clone()
    }

    /// Validates the next requests of every service this layer (or a clone of it) made with
    /// `validator`: new keys, issuers or a new JWKS URL without a restart. Requests already
    /// authenticated keep going, and a request waiting for a JWKS fetch finishes with the
    /// validator it started with.
    ///
    /// ```
    /// use jsonwebtoken::Algorithm;
    /// use mcp_claims::{ClaimsLayer, Issuer, JwtValidator};
    ///
    /// let validator = |iss: &str| {
    ///     let issuer = Issuer::new(iss).hmac_secret([7u8; 32], [Algorithm::HS256]);
    ///     JwtValidator::builder().issuer(issuer).audience("mcp").build().unwrap()
    /// };
    /// let layer = ClaimsLayer::new(validator("https://old.example"));
    /// let new = validator("https://new.example");
    /// layer.clone().replace_validator(new);
    /// assert!(layer.validator().issuers().any(|iss| iss == "https://new.example"));
    /// ```
    pub fn replace_validator(&self, validator: JwtValidator) {
        self.shared.replace(validator);
    }

    fn with_metadata(self, metadata: ResourceMetadata) -> Self {
        Self {
            shared: Arc::new(Shared::new(self.validator(), metadata)),
        }
    }
}

impl<S> Layer<S> for ClaimsLayer {
    type Service = ClaimsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ClaimsService::from_shared(inner, Arc::clone(&self.shared))
    }
}
