//! In-process HTTP tests.
