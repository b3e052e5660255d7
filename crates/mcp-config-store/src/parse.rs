//! Parsing JSON and TOML documents into the model with errors that name the offending field.

use std::path::Path;

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer};
use url::Url;

use crate::error::{ConfigError, FieldError};

/// Format of a configuration document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DocumentFormat {
    /// JSON.
    Json,
    /// TOML (with the `file` feature).
    #[cfg(feature = "file")]
    Toml,
}

impl DocumentFormat {
    /// The format a file name's extension implies: `.json`, or `.toml` (with the `file` feature),
    /// case-insensitively; `None` for anything else.
    ///
    /// ```
    /// use mcp_config_store::DocumentFormat;
    /// use std::path::Path;
    ///
    /// assert_eq!(DocumentFormat::from_path(Path::new("users.json")), Some(DocumentFormat::Json));
    /// assert_eq!(DocumentFormat::from_path(Path::new("users.yaml")), None);
    /// ```
    pub fn from_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "json" => Some(Self::Json),
            #[cfg(feature = "file")]
            "toml" => Some(Self::Toml),
            _ => None,
        }
    }
}

/// `serde_path_to_error` prints the root as `.`; we report it as an empty path.
fn path_string(path: &serde_path_to_error::Path) -> String {
    let s = path.to_string();
    if s == "." { String::new() } else { s }
}

/// Deserialises JSON, tracking the path of the field that failed.
pub(crate) fn json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ConfigError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = path_string(e.path());
        ConfigError::single(json_field_error(path, e.inner()))
    })?;
    // Trailing characters after the document are an error, as in `serde_json::from_slice`.
    de.end()
        .map_err(|e| ConfigError::single(json_field_error(String::new(), &e)))?;
    Ok(value)
}

fn json_field_error(path: String, err: &serde_json::Error) -> FieldError {
    let full = err.to_string();
    let message = match err.classify() {
        // A data error is located by its path (or is about the root); the position adds nothing
        // and the message reads better without it (`...url: relative URL without a base`).
        // `line()`/`column()` still carry it.
        serde_json::error::Category::Data => {
            let suffix = format!(" at line {} column {}", err.line(), err.column());
            full.strip_suffix(&suffix).unwrap_or(&full).to_owned()
        }
        // Syntax errors keep serde_json's "at line L column C": it is the only locator.
        _ => full,
    };
    FieldError::new(path, message).with_location(Some(err.line()), Some(err.column()))
}

/// Deserialises TOML, tracking the path of the field that failed.
#[cfg(feature = "file")]
pub(crate) fn toml<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let de = ::toml::Deserializer::parse(text)
        .map_err(|e| ConfigError::single(toml_field_error(String::new(), &e, text)))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = path_string(e.path());
        ConfigError::single(toml_field_error(path, e.inner(), text))
    })
}

#[cfg(feature = "file")]
fn toml_field_error(path: String, err: &::toml::de::Error, text: &str) -> FieldError {
    let (line, column) = err.span().map(|span| line_column(text, span.start)).unzip();
    let mut message = err.message().trim_end().to_owned();
    if path.is_empty()
        && let (Some(l), Some(c)) = (line, column)
    {
        // Without a path, the position is the only locator (syntax errors).
        message = format!("{message} at line {l} column {c}");
    }
    FieldError::new(path, message).with_location(line, column)
}

/// 1-based line and column (in characters) of a byte offset.
#[cfg(feature = "file")]
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Parses a URL without echoing the input in the error: a URL may carry credentials, and errors
/// end up in logs. The message is the `url` crate's, e.g. `relative URL without a base`.
fn parse_url<E: serde::de::Error>(s: &str) -> Result<Url, E> {
    Url::parse(s).map_err(E::custom)
}

pub(crate) fn de_opt_url<'de, D: Deserializer<'de>>(de: D) -> Result<Option<Url>, D::Error> {
    Option::<String>::deserialize(de)?
        .map(|s| parse_url(&s))
        .transpose()
}

pub(crate) fn de_url_list<'de, D: Deserializer<'de>>(de: D) -> Result<Vec<Url>, D::Error> {
    struct UrlItem(Url);
    impl<'de> Deserialize<'de> for UrlItem {
        fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
            let s = String::deserialize(de)?;
            parse_url(&s).map(UrlItem)
        }
    }
    // Deserialising items one by one keeps the `[i]` index in the error path.
    let items = Vec::<UrlItem>::deserialize(de)?;
    Ok(items.into_iter().map(|UrlItem(u)| u).collect())
}
