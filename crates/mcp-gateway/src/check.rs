//! [`check_config`]: everything `mcp-gateway check-config` verifies, without binding a port.

use crate::auth;
use crate::config::{ConfigError, GatewayConfig, Problem};
use crate::error::GatewayError;
use crate::store::{DocumentReport, check_documents};
use crate::tls;

/// What a successful check found.
#[derive(Debug)]
#[non_exhaustive]
pub struct CheckReport {
    /// The user configurations checked.
    pub documents: DocumentReport,
    /// Whether HS256 tokens can be minted (`mcp-gateway token`).
    pub hs256: bool,
}

/// Validates the process configuration beyond its syntax (token keys readable and usable, TLS
/// files, secrets present in the environment, the plugin document) and every stored user configuration (validation,
/// features this build lacks). With `warnings_are_errors`, overlapping backend names fail too
/// (book: docs/src/architecture.md: a warning when serving, an error for `check-config`).
///
/// # Errors
///
/// [`GatewayError::Config`] listing every problem, each naming its source and key;
/// [`GatewayError::Store`] when the Redis store cannot be reached.
pub async fn check_config(
    config: &GatewayConfig,
    warnings_are_errors: bool,
) -> Result<CheckReport, GatewayError> {
    let mut errors: Option<ConfigError> = None;
    let mut add = |e: ConfigError| match &mut errors {
        Some(all) => all.extend(e),
        None => errors = Some(e),
    };
    let hs256 = match auth::hs256_secret(config, None) {
        Ok(secret) => secret.is_some(),
        Err(e) => {
            add(e);
            false
        }
    };
    if let Err(e) = auth::build_validator(config, None) {
        add(e);
    }
    if let Some(files) = &config.listen.tls
        && let Err(e) = tls::acceptor(config, files)
    {
        add(e);
    }
    if let Err(e) = tls::backend_tls(config) {
        add(e);
    }
    if let Err(e) = auth::sealing_secret(config, None) {
        add(e);
    }
    if let Err(e) = crate::plugins::check(config).await {
        add(e);
    }
    let documents = match check_documents(config).await {
        Ok(report) => Some(report),
        Err(GatewayError::Config(e)) => {
            add(e);
            None
        }
        Err(other) => return Err(other),
    };
    if let Some(report) = &documents
        && warnings_are_errors
    {
        let problems: Vec<Problem> = report
            .warnings
            .iter()
            .map(|(source, finding)| Problem {
                source: source.clone(),
                key: finding.path.clone(),
                message: format!(
                    "{} (a warning when serving; an error for check-config)",
                    finding.message
                ),
            })
            .collect();
        if let Some(e) = ConfigError::from_problems(problems) {
            add(e);
        }
    }
    if let Some(e) = errors {
        return Err(e.into());
    }
    Ok(CheckReport {
        documents: documents.unwrap_or_default(),
        hs256,
    })
}
