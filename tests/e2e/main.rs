//! End-to-end tests: the real `weft` binary on 127.0.0.1:0, driven over raw TCP, HTTP and
//! its own CLI. One test per user-visible journey; the detailed cases live in-process in
//! `src/http/tests/`.

mod audit;
mod cdp;
mod cli;
mod context;
mod crash;
mod delivery;
mod first_hour;
mod garage;
mod migrate;
mod offline;
mod python_client;
mod reactions;
mod readme;
mod restart;
mod resume;
mod revoke;
mod rule_ids;
mod scale_out;
mod scale_out_faults;
mod schemathesis;
mod schemathesis_data;
mod sign_in;
mod support;
mod tidy;
mod transport;
mod truncation;
mod ui;
mod witness;
mod work;
mod worker;
