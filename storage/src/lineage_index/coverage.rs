//! Which committed `manifests` rows the lineage index holds, by rowid: every row up to
//! `through`, and the rows above it that arrived out of order. Publications reach the index
//! after their commit, in any order, so a row counts as covered only when every row below it
//! is in (`note`). The snapshot stores it (`snapshot.rs`) and a restart checks it against the
//! tables (`restart.rs`).

use std::collections::BTreeMap;

use weft_api::ArtifactId;

/// Which committed `manifests` rows the index holds, by rowid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Coverage {
    /// Every committed row with a rowid up to this one is in the index; with that row's
    /// manifest id (all zeros for rowid 0, no rows).
    pub(super) through: (u64, ArtifactId),
    /// Rows above `through` that are in the index already (publications added out of order).
    pub(super) ahead: BTreeMap<u64, ArtifactId>,
}

impl Default for Coverage {
    fn default() -> Self {
        Self {
            through: (0, ArtifactId([0; 32])),
            ahead: BTreeMap::new(),
        }
    }
}

impl Coverage {
    /// Row `rowid` is now in the index.
    pub(super) fn note(&mut self, rowid: u64, manifest_id: ArtifactId) {
        if rowid > self.through.0 {
            self.ahead.insert(rowid, manifest_id);
            self.advance();
        }
    }

    /// Every row one read of the database saw, up to `last`, is now in the index.
    pub(super) fn caught_up(&mut self, last: Option<(u64, ArtifactId)>) {
        if let Some(last) = last
            && last.0 > self.through.0
        {
            self.through = last;
        }
        self.ahead = self.ahead.split_off(&(self.through.0 + 1));
        self.advance();
    }

    fn advance(&mut self) {
        while let Some(manifest_id) = self.ahead.remove(&(self.through.0 + 1)) {
            self.through = (self.through.0 + 1, manifest_id);
        }
    }
}
