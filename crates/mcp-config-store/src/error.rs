//! Errors: [`StoreError`] (loading a subject's configuration) and [`ConfigError`] (parsing and
//! validating a configuration document).

use std::fmt;
use std::sync::Arc;

/// What kind of failure a [`StoreError`] is; decides the HTTP status the
/// [`ConfigStoreLayer`](crate::ConfigStoreLayer) answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The store cannot be reached: connection refused or lost, pool or response timeout, or the
    /// store is known to be down and reconnecting in the background. Answered with 503 and
    /// `Retry-After`; the client may retry.
    Unavailable,
    /// The stored document exists but cannot be decoded or fails validation. Answered with 500.
    Corrupt,
    /// Any other failure that is not "missing data", e.g. a subject that cannot be encoded as a
    /// store key. Answered with 500.
    Other,
}

impl fmt::Display for StoreErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Unavailable => "configuration store unavailable",
            Self::Corrupt => "user configuration corrupt",
            Self::Other => "configuration store error",
        })
    }
}

/// A failure to load a subject's configuration (missing data is `Ok(None)`, not an error).
///
/// Cheap to clone (the message is shared), because caches hand one error to every request that
/// waited on the same load. The message is for logs and operators; the HTTP layer never puts it in
/// a response body.
///
/// ```
/// use mcp_config_store::{StoreError, StoreErrorKind};
///
/// let err = StoreError::unavailable("connection refused");
/// assert_eq!(err.kind(), StoreErrorKind::Unavailable);
/// assert!(err.is_unavailable());
/// assert_eq!(err.to_string(), "configuration store unavailable: connection refused");
/// ```
#[derive(Clone, Debug)]
pub struct StoreError {
    kind: StoreErrorKind,
    message: Arc<str>,
}

impl StoreError {
    /// An error of the given kind.
    pub fn new(kind: StoreErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: Arc::from(message.into()),
        }
    }

    /// A [`StoreErrorKind::Unavailable`] error.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::Unavailable, message)
    }

    /// A [`StoreErrorKind::Corrupt`] error.
    pub fn corrupt(message: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::Corrupt, message)
    }

    /// A [`StoreErrorKind::Other`] error.
    pub fn other(message: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::Other, message)
    }

    /// The kind of failure.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// Whether this is [`StoreErrorKind::Unavailable`].
    pub fn is_unavailable(&self) -> bool {
        self.kind == StoreErrorKind::Unavailable
    }

    /// The detail message (for logs; may name keys, never secrets).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for StoreError {}

/// One problem in a configuration document, located by the path of the offending field.
///
/// Paths use the document's keys joined by `.` with `[i]` for list items, e.g.
/// `virtual_hosts.vh1.backends.weather.url` or `virtual_hosts.vh1.backends.w.replicas[0]`; an
/// empty path means the document as a whole (e.g. a JSON syntax error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    path: String,
    message: String,
    line: Option<usize>,
    column: Option<usize>,
}

impl FieldError {
    pub(crate) fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
            line: None,
            column: None,
        }
    }

    pub(crate) fn with_location(mut self, line: Option<usize>, column: Option<usize>) -> Self {
        self.line = line.filter(|l| *l > 0);
        self.column = column.filter(|_| self.line.is_some());
        self
    }

    /// Path of the offending field (empty for the whole document).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong, without the path.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// 1-based line in the source text, when the parser reported one.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// 1-based column in the source text, when the parser reported one.
    pub fn column(&self) -> Option<usize> {
        self.column
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// A configuration document that could not be parsed or failed validation.
///
/// Parse errors carry exactly one [`FieldError`]; validation reports every problem it finds, so an
/// operator can fix a document in one pass. `Display` joins them with `; `.
///
/// ```
/// use mcp_config_store::UserConfig;
///
/// let err = UserConfig::from_json_str(
///     r#"{"virtual_hosts":{"vh1":{"backends":{"weather":{"url":"weather"}}}}}"#,
/// )
/// .unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "virtual_hosts.vh1.backends.weather.url: relative URL without a base"
/// );
/// assert_eq!(err.errors()[0].path(), "virtual_hosts.vh1.backends.weather.url");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    errors: Vec<FieldError>,
}

impl ConfigError {
    pub(crate) fn from_errors(errors: Vec<FieldError>) -> Self {
        Self { errors }
    }

    pub(crate) fn single(error: FieldError) -> Self {
        Self {
            errors: vec![error],
        }
    }

    /// Every problem found (at least one).
    pub fn errors(&self) -> &[FieldError] {
        &self.errors
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            fmt::Display::fmt(e, f)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}
