//! Integration tests: each backend era driven by rmcp's own client and by raw HTTP.

mod clients;
mod raw_http;

mod cancellation;
mod changes;
mod discover_probe;
mod eras;
mod lifecycle;
mod mrtr;
mod pagination;
mod progress;
mod recording;
mod tasks;
