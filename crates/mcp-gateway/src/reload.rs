//! [`Reloader`]: applies a new process configuration to a running gateway without a restart
//! (book: docs/src/deploying.md, "Reloading without a restart").
//!
//! A reload compares the new configuration with the running one key by key. Every changed key
//! must be one a running gateway can take ([`reloadable`](crate::config::reloadable)); one that is not (a listen address,
//! a store kind) refuses the whole reload, naming it, and the running configuration stays. Then
//! everything the reload needs is built (the token validator, the TLS certificate, the
//! destination lists, the stdio rules), and only when all of it is valid is it swapped in: an
//! invalid file never leaves the gateway half reloaded. Connections, sessions and streams are not
//! touched; requests from then on see the new settings.
//!
//! Files named by unchanged keys are read again all the same: a renewed certificate at the same
//! path, or a PEM key edited in place, takes effect.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use mcp_claims::ClaimsLayer;
use mcp_router::session::{KeyRing, SealedSessionStore};
use mcp_router::{DestinationPolicy, McpRouter};

use crate::audit::AuditFile;
use crate::auth;
use crate::config::{
    ConfigError, EffectiveConfig, GatewayConfig, Override, SessionsKind, reloadable,
};
use crate::limits::RequestLimits;
use crate::metadata::ResourceMetadata;
use crate::metrics;
use crate::store::OperatorRulesCell;
use crate::tls::{self, ServerCert};
use crate::users::OperatorRules;

/// Why a reload was not applied. The running configuration stays in every case.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadError {
    /// A changed key a running gateway cannot take.
    #[error("{key} changed, which needs a restart ({reason}); the running configuration stays")]
    NeedsRestart {
        /// The key.
        key: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// The new configuration is invalid (a file it names cannot be read, a key it sets does not
    /// parse), naming the key.
    #[error("{0}; the running configuration stays")]
    Invalid(#[from] ConfigError),
}

/// What a reload applied.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reloaded {
    /// The configuration generation now running (1 at start, one more per applied reload).
    pub generation: u64,
    /// The keys whose values changed (files named by unchanged keys were read again too), and
    /// [`STDIO_CATALOG`] when the stdio catalog changed.
    pub changed: Vec<&'static str>,
}

/// Applies new process configurations to a running gateway. Cheap to clone; clones share the
/// gateway. Get it from [`Gateway::reloader`](crate::Gateway::reloader).
#[derive(Clone)]
pub struct Reloader {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader")
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

struct Inner {
    /// The running configuration and the bytes of the PEM key file it names; held while a
    /// reload runs, so reloads never interleave.
    running: Mutex<Running>,
    generation: Arc<AtomicU64>,
    parts: Parts,
}

/// The running configuration, with what a reload compares beyond its keys.
struct Running {
    config: Arc<GatewayConfig>,
    /// The bytes of `auth.jwt.public_key_pem`'s file when the validator was built: a key edited
    /// in place makes a reload build the validator again.
    key_file: Option<Vec<u8>>,
}

/// What a reload replaces in the running gateway.
pub(crate) struct Parts {
    /// `None` when the embedding application gave the validator
    /// ([`GatewayBuilder::validator`](crate::GatewayBuilder::validator)).
    pub(crate) claims: Option<ClaimsLayer>,
    /// The HS256 secret the application gave instead of the environment variable.
    pub(crate) hs256_secret: Option<Vec<u8>>,
    pub(crate) tls: Option<Arc<ServerCert>>,
    pub(crate) destinations: DestinationPolicy,
    pub(crate) router: McpRouter,
    pub(crate) store_rules: OperatorRulesCell,
    pub(crate) limits: Arc<ArcSwap<RequestLimits>>,
    /// The RFC 9728 documents, whose `authorization_servers` default to the issuers.
    pub(crate) metadata: Arc<ArcSwap<ResourceMetadata>>,
    /// The sealed session store, whose key ring a reload replaces.
    pub(crate) sealed: Option<Arc<SealedSessionStore>>,
    /// The audit trail's file, opened again after every applied reload (it may be rotated).
    pub(crate) audit_file: Option<AuditFile>,
}

/// What a reload built, to swap in once all of it is valid.
struct Built {
    validator: Option<mcp_claims::JwtValidator>,
    ring: Option<KeyRing>,
    certificate: Option<rustls::sign::CertifiedKey>,
    destinations: DestinationPolicy,
}

impl Reloader {
    pub(crate) fn new(
        config: Arc<GatewayConfig>,
        generation: Arc<AtomicU64>,
        parts: Parts,
    ) -> Self {
        generation.store(1, Ordering::Relaxed);
        metrics::record_config_generation(1);
        let key_file = key_file(&config);
        Self {
            inner: Arc::new(Inner {
                running: Mutex::new(Running { config, key_file }),
                generation,
                parts,
            }),
        }
    }

    /// The configuration generation running now: 1 at start, one more per applied reload
    /// (`/readyz` shows it).
    pub fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Relaxed)
    }

    /// The configuration running now.
    pub fn running(&self) -> Arc<GatewayConfig> {
        Arc::clone(
            &self
                .inner
                .running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .config,
        )
    }

    /// Reads the configuration again from the same sources as at start (`file`, the process's
    /// environment, the command line's `overrides`) and [`reload`](Self::reload)s it; a file
    /// that does not parse or build is [`ReloadError::Invalid`] (counted and refused alike).
    ///
    /// # Errors
    ///
    /// As [`reload`](Self::reload).
    pub fn reload_from(
        &self,
        file: Option<&std::path::Path>,
        overrides: &[Override],
    ) -> Result<Reloaded, ReloadError> {
        let built = EffectiveConfig::from_sources(file, std::env::vars(), overrides).and_then(
            |effective| {
                for warning in effective.warnings() {
                    tracing::warn!(%warning, "configuration warning");
                }
                effective.build()
            },
        );
        match built {
            Ok(config) => self.reload(config),
            Err(e) => {
                metrics::record_reload("invalid");
                Err(ReloadError::Invalid(e))
            }
        }
    }

    /// Applies `config` if every key it changes can change at run time ([`reloadable`](crate::config::reloadable)), reading
    /// the files it names again (TLS certificate and key, the validator's keys): the JWT
    /// validator (issuers, keys, JWKS URL, audiences, leeway, scopes), the TLS certificate, the
    /// stdio catalog and allow-list, the destination lists and the `Mcp-*` header limits.
    ///
    /// # Errors
    ///
    /// [`ReloadError::NeedsRestart`] naming the first changed key that cannot change at run time
    /// (also: turning TLS on or off, going between one and several issuers, changing the
    /// validator the application gave); [`ReloadError::Invalid`] when something it names cannot
    /// be built. Nothing is applied then.
    pub fn reload(&self, config: GatewayConfig) -> Result<Reloaded, ReloadError> {
        let result = self.apply(config);
        metrics::record_reload(match &result {
            Ok(_) => "applied",
            Err(ReloadError::NeedsRestart { .. }) => "refused",
            Err(ReloadError::Invalid(_)) => "invalid",
        });
        result
    }

    fn apply(&self, config: GatewayConfig) -> Result<Reloaded, ReloadError> {
        let mut running = self
            .inner
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut changed = changed_keys(&running.config, &config);
        // The rules that depend on typed values are checked whatever the keys say: a
        // configuration an application edited by hand carries the keys it started from.
        if let Some((key, reason)) = typed_refusal(&running.config, &config) {
            return Err(ReloadError::NeedsRestart { key, reason });
        }
        for key in &changed {
            if let Some(reason) = self.refusal(key) {
                return Err(ReloadError::NeedsRestart { key, reason });
            }
        }
        let key_file = key_file(&config);
        let validator_changed =
            changed.iter().any(|key| key.starts_with("auth.jwt.")) || key_file != running.key_file;
        let ring_changed = changed.contains(&"sessions.keys_env");
        let built = self.build(&config, validator_changed, ring_changed)?;
        if running.config.backends.stdio_rules() != config.backends.stdio_rules() {
            changed.push(STDIO_CATALOG);
        }
        let parts = &self.inner.parts;
        if let (Some(claims), Some(validator)) = (&parts.claims, built.validator) {
            claims.replace_validator(validator);
        }
        if let (Some(cert), Some(key)) = (&parts.tls, built.certificate) {
            cert.replace(key);
        }
        if let (Some(sealed), Some(ring)) = (&parts.sealed, built.ring) {
            sealed.replace_ring(ring);
        }
        if let Some(file) = &parts.audit_file {
            file.reopen();
        }
        parts.destinations.replace_lists(&built.destinations);
        parts
            .router
            .replace_stdio_rules(config.backends.stdio_rules());
        parts
            .store_rules
            .store(Arc::new(OperatorRules::from_config(&config)));
        parts
            .limits
            .store(Arc::new(RequestLimits::from_config(&config)));
        parts
            .metadata
            .store(Arc::new(ResourceMetadata::from_config(&config)));
        *running = Running {
            config: Arc::new(config),
            key_file,
        };
        let generation = self.inner.generation.fetch_add(1, Ordering::Relaxed) + 1;
        metrics::record_config_generation(generation);
        Ok(Reloaded {
            generation,
            changed,
        })
    }

    /// Why a change of `key` cannot be applied, if it cannot.
    fn refusal(&self, key: &str) -> Option<&'static str> {
        if !reloadable(key) {
            Some("a running gateway cannot take it")
        } else if key.starts_with("auth.jwt.") && self.inner.parts.claims.is_none() {
            Some("the embedding application gave the token validator")
        } else {
            None
        }
    }

    /// Everything the reload swaps in, built from `config` (files read again). The validator is
    /// built again only when one of its keys or its key file changed: a new one starts with
    /// empty caches (its JWKS fetched again at first use), which a reload for a certificate or
    /// a log level has no reason to cost.
    fn build(
        &self,
        config: &GatewayConfig,
        validator_changed: bool,
        ring_changed: bool,
    ) -> Result<Built, ConfigError> {
        let parts = &self.inner.parts;
        let validator = match &parts.claims {
            Some(_) if validator_changed => Some(auth::build_validator(
                config,
                parts.hs256_secret.as_deref(),
            )?),
            _ => None,
        };
        let certificate = match (&parts.tls, &config.listen.tls) {
            (Some(_), Some(files)) => Some(tls::certified_key(config, files)?),
            _ => None,
        };
        let destinations = DestinationPolicy::new(
            &config.backends.allow_destinations,
            &config.backends.deny_destinations,
        )
        .map_err(|reason| config.problem("backends.deny_destinations", reason.to_string()))?;
        let ring = match &config.sessions.kind {
            SessionsKind::Sealed { keys, .. } if ring_changed && parts.sealed.is_some() => Some(
                KeyRing::parse(keys)
                    .map_err(|e| config.problem("sessions.keys_env", e.to_string()))?,
            ),
            _ => None,
        };
        Ok(Built {
            validator,
            ring,
            certificate,
            destinations,
        })
    }
}

/// The name a change of the stdio catalog (`[stdio_servers.*]` tables, not keys) is reported
/// under in [`Reloaded::changed`].
pub const STDIO_CATALOG: &str = "stdio_servers";

/// A change of typed values that cannot be applied: TLS turned on or off, or a move between
/// one issuer and several.
fn typed_refusal(
    running: &GatewayConfig,
    new: &GatewayConfig,
) -> Option<(&'static str, &'static str)> {
    if running.listen.tls.is_some() != new.listen.tls.is_some() {
        return Some((
            "listen.tls_cert",
            "turning TLS on or off changes the listener",
        ));
    }
    if (running.auth.jwt.issuers.len() > 1) != (new.auth.jwt.issuers.len() > 1) {
        return Some((
            "auth.jwt.issuers",
            "going between one and several issuers changes how user configurations are keyed",
        ));
    }
    None
}

/// The bytes of the PEM key file `config` names, if any (unreadable: none, and building the
/// validator reports why).
fn key_file(config: &GatewayConfig) -> Option<Vec<u8>> {
    std::fs::read(config.auth.jwt.public_key_pem.as_ref()?).ok()
}

/// The keys whose values differ between `old` and `new`, in key order.
fn changed_keys(old: &GatewayConfig, new: &GatewayConfig) -> Vec<&'static str> {
    let (old, new) = (&old.values.0, &new.values.0);
    let mut keys: Vec<&'static str> = old
        .keys()
        .chain(new.keys())
        .copied()
        .filter(|key| old.get(key) != new.get(key))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EffectiveConfig;

    fn config(text: &str) -> GatewayConfig {
        EffectiveConfig::from_toml_str(text, "test.toml")
            .and_then(|c| c.build())
            .expect("valid")
    }

    const BASE: &str = r#"
[listen]
addr = "127.0.0.1:0"
[auth.jwt]
issuer = "https://issuer.example"
audience = "mcp"
"#;

    #[test]
    fn changed_keys_are_the_ones_whose_values_differ() {
        let old = config(BASE);
        let new = config(&format!(
            "{BASE}leeway_s = 7\n[limits]\nmax_mcp_headers = 3\n[runtime]\nthreads = 2\n"
        ));
        assert_eq!(
            changed_keys(&old, &new),
            [
                "auth.jwt.leeway_s",
                "limits.max_mcp_headers",
                "runtime.threads"
            ]
        );
        assert!(changed_keys(&old, &config(BASE)).is_empty());
    }

    #[test]
    fn reloadable_keys_are_the_ones_a_running_gateway_applies() {
        for key in [
            "auth.jwt.jwks_url",
            "auth.jwt.public_key_pem",
            "listen.tls_cert",
            "backends.deny_destinations",
            "backends.stdio_allowed_commands",
            "telemetry.log_level",
        ] {
            assert!(reloadable(key), "{key}");
        }
        for key in [
            "listen.addr",
            "listen.admin_addr",
            "config_store.kind",
            "sessions.kind",
            "runtime.mode",
            "limits.max_body_bytes",
        ] {
            assert!(!reloadable(key), "{key}");
        }
    }
}
