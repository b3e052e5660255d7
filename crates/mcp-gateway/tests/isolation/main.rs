//! The tenant-isolation suite (SECURITY.md guarantees 3 and 4): the release binary over real
//! sockets, each test with two or three principals and a control that shows the test can fail.

#[path = "../support/mod.rs"]
mod support;

mod scope;
