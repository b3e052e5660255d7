//! The dependencies of the book's Rust snippets (`docs/src/*.md`), and nothing else.
//!
//! `mdbook test` compiles each snippet with `rustdoc --test -L <dir>`, which fails when `<dir>`
//! holds two builds of one crate (the workspace's shared target directory does: tests, examples
//! and feature sets differ). `cargo xtask book` therefore builds this package alone into a target
//! directory of its own and passes that directory's `deps/`.
