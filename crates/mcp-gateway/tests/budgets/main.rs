//! The budget rule over the real process (book: docs/src/security.md, "Budgets"): what the
//! gateway holds for a caller is charged to that caller's principal, and a spent budget costs
//! that principal its own new work, never another principal's. Each test has two principals (or
//! one principal and its own backend) and a control that the same traffic within budget works.
//! One module per topic.

#[path = "../support/mod.rs"]
mod support;

mod bridge;
mod caches;
mod links;
mod loops;
mod relays;
mod streams;
mod time;
