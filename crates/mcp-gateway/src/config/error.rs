//! [`ConfigError`]: every problem of a process configuration, each naming where the value came
//! from (file, environment variable, command line), the key and what is wrong.

use std::fmt;
use std::path::PathBuf;

/// Where a configuration value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// The key's documented default.
    Default,
    /// A configuration file.
    File(PathBuf),
    /// An environment variable (its name).
    Env(String),
    /// A command-line flag (as written, e.g. `--listen` or `--set listen.addr`).
    Cli(String),
    /// Set in code by an integrator (or a value built from several sources).
    Code,
    /// A stored document other than a file, e.g. `redis key mcpgw:user:alice`.
    Document(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Env(name) => write!(f, "environment variable {name}"),
            Self::Cli(flag) => write!(f, "command line {flag}"),
            Self::Code => f.write_str("configuration"),
            Self::Document(name) => f.write_str(name),
        }
    }
}

/// One problem: where, which key, what.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Problem {
    /// Where the offending value came from.
    pub source: Source,
    /// The key (or section) at fault, e.g. `listen.addr`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.source, self.message)
        } else {
            write!(f, "{}: {}: {}", self.source, self.key, self.message)
        }
    }
}

/// A configuration that cannot be used; lists every problem found (one per line when displayed).
///
/// ```
/// let err = mcp_gateway::config::GatewayConfig::from_toml_str("[listen]\naddr = \"nowhere\"\n")
///     .unwrap_err();
/// assert!(err.to_string().contains("listen.addr"), "{err}");
/// assert_eq!(err.problems()[0].key, "listen.addr");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    problems: Vec<Problem>,
}

impl ConfigError {
    /// An error with one problem.
    pub fn new(source: Source, key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            problems: vec![Problem {
                source,
                key: key.into(),
                message: message.into(),
            }],
        }
    }

    /// An error from several problems (`None` when there are none).
    pub fn from_problems(problems: Vec<Problem>) -> Option<Self> {
        (!problems.is_empty()).then_some(Self { problems })
    }

    /// The problems, in the order they were found.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Adds the problems of `other`.
    pub fn extend(&mut self, other: ConfigError) {
        self.problems.extend(other.problems);
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Collects problems while a configuration is read.
#[derive(Debug, Default)]
pub(crate) struct Problems(Vec<Problem>);

impl Problems {
    pub(crate) fn push(&mut self, source: &Source, key: &str, message: impl Into<String>) {
        self.0.push(Problem {
            source: source.clone(),
            key: key.to_owned(),
            message: message.into(),
        });
    }

    pub(crate) fn into_result(self) -> Result<(), ConfigError> {
        ConfigError::from_problems(self.0).map_or(Ok(()), Err)
    }
}
