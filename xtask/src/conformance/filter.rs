//! Running a part of `cargo xtask conformance` while working on it:
//!
//! ```text
//! cargo xtask conformance [--only official,matrix,contract] [--clients NAME,...]
//! ```
//!
//! `--only` picks the parts to run; `--clients` the matrix clients whose report name contains
//! one of the given texts (`ts-sdk-2`, `rmcp (auto)`, ...). A filtered run judges what ran
//! against the baseline (a failure or a stale pass still fails it) but cannot tell whether an
//! entry naming something that did not run is stale: only an unfiltered run checks that.

/// The parts of the run.
pub(crate) const PARTS: [&str; 3] = ["official", "matrix", "contract"];

/// What to run.
#[derive(Debug, Default)]
pub(crate) struct Filter {
    /// The parts to run (`None`: every part).
    parts: Option<Vec<String>>,
    /// Texts one of which a matrix client's name contains (`None`: every client).
    clients: Option<Vec<String>>,
}

impl Filter {
    /// Parses the arguments after `conformance`.
    pub(crate) fn parse(args: &[String]) -> Result<Self, String> {
        let mut filter = Self::default();
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let value = args
                .next()
                .ok_or_else(|| format!("conformance: {flag} needs a value"))?;
            let list: Vec<String> = value.split(',').map(|v| v.trim().to_owned()).collect();
            match flag.as_str() {
                "--only" => {
                    if let Some(unknown) = list.iter().find(|p| !PARTS.contains(&p.as_str())) {
                        return Err(format!(
                            "conformance: unknown part {unknown:?} (parts: {})",
                            PARTS.join(", ")
                        ));
                    }
                    filter.parts = Some(list);
                }
                "--clients" => filter.clients = Some(list),
                _ => {
                    return Err(format!(
                        "conformance: unknown option {flag:?} (--only PARTS, --clients NAMES)"
                    ));
                }
            }
        }
        Ok(filter)
    }

    /// Whether part `part` (one of [`PARTS`]) runs.
    pub(crate) fn runs(&self, part: &str) -> bool {
        self.parts
            .as_ref()
            .is_none_or(|parts| parts.iter().any(|p| p == part))
    }

    /// Whether the matrix client named `name` runs.
    pub(crate) fn client(&self, name: &str) -> bool {
        self.clients
            .as_ref()
            .is_none_or(|texts| texts.iter().any(|text| name.contains(text.as_str())))
    }

    /// Whether something is left out (then stale entries naming nothing that ran are not
    /// reported).
    pub(crate) fn is_partial(&self) -> bool {
        self.parts.is_some() || self.clients.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::Filter;

    fn parse(args: &[&str]) -> Result<Filter, String> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        Filter::parse(&args)
    }

    #[test]
    fn no_argument_runs_everything() {
        let filter = parse(&[]).expect("no arguments");
        assert!(!filter.is_partial());
        assert!(filter.runs("official") && filter.runs("contract"));
        assert!(filter.client("rmcp (auto)"));
    }

    #[test]
    fn only_and_clients_pick_parts_and_clients_by_name() {
        let filter = parse(&["--only", "matrix", "--clients", "ts-sdk-2,rmcp (auto)"])
            .expect("valid filter");
        assert!(filter.is_partial());
        assert!(filter.runs("matrix") && !filter.runs("official") && !filter.runs("contract"));
        assert!(filter.client("ts-sdk-2.x (auto)") && filter.client("rmcp (auto)"));
        assert!(!filter.client("rmcp (2025 session)"));
    }

    #[test]
    fn unknown_parts_options_and_missing_values_are_refused() {
        assert!(parse(&["--only", "matrix,nope"]).is_err());
        assert!(parse(&["--bogus", "x"]).is_err());
        assert!(parse(&["--only"]).is_err());
    }
}
