//! Examples and end-to-end tests for the MCP gateway layer crates; this library is empty.
