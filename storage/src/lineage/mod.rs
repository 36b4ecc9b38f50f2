//! Lineage, the feature (DESIGN §6, ART-4): provenance queries for a reader (`query.rs`), the
//! lineage index's snapshot saved (`saving.rs`), and the handle (`handle.rs`). The provenance
//! graph itself is `lineage_index/`, in memory: the engine holds it, a publication adds to it
//! (`artifacts/publish.rs`), and open reads it back (`lifecycle.rs`).

pub(crate) mod handle;
mod query;
mod saving;
