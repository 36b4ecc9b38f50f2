//! In-process HTTP tests: `server::app(state).oneshot(request)`, each one stamped once per
//! backend (object_store `InMemory` + SQLite in memory, and `LocalFileSystem` + SQLite on
//! disk) by `backends!`. Each refused request goes through `refused`, which asserts its
//! problem+json `code` and that nothing changed. The harness is in `harness.rs`; the tests are
//! in one file per feature.

pub(crate) mod harness;

mod access;
mod actor_events;
mod actors;
mod admin;
mod approvals;
mod artifacts;
mod attempts;
mod binding;
mod blobs;
mod budget;
mod citations;
mod content;
mod context;
mod context_forward;
mod context_reads;
mod context_scope;
mod contracts;
mod conversation;
mod delivery;
mod deterministic;
mod downloads;
mod duties;
mod evidence;
mod exports;
mod faults;
mod flood;
mod garage;
mod held;
mod hot;
mod idempotency;
mod journal;
mod leases;
mod limits;
mod lineage;
mod meta;
mod mission_close;
mod offers;
mod offline;
mod paging;
mod planning;
mod priority;
mod progress;
mod proofs;
mod ranges;
mod reactions;
mod replay;
mod restart;
mod reuse;
mod review;
mod revisions;
mod revocation;
mod scope;
mod scope_leases;
mod session_replay;
mod sessions;
mod snapshots;
mod standards;
mod statements;
mod streams;
mod token_uploads;
mod tokens;
mod truncation;
mod ui;
mod ui_console;
mod uploads;
mod wire;
mod with_content;
mod work;
mod work_cases;
mod work_refusals;
mod work_setup;
