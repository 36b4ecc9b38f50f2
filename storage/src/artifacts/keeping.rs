//! What collection weighs (issue #46), for bytes (`collection.rs`) and records
//! (`records.rs`) alike: the retention policies in force, and what the holds in force keep.

use std::collections::{BTreeMap, BTreeSet};

use weft_api::lifecycle::{HoldTarget, Retention, format_duration};
use weft_api::manifest::Classification;
use weft_api::{ArtifactId, Id};

use crate::error::Error;
use crate::rows;
use crate::sql::Connection;

/// The policies in force: the Groups', their Missions' and their classifications'.
#[derive(Default)]
pub(super) struct Policies {
    of_group: BTreeMap<Id, Retention>,
    of_mission: BTreeMap<Id, Retention>,
    /// By Group and classification (its wire name).
    of_class: BTreeMap<(Id, &'static str), Retention>,
}

impl Policies {
    pub(super) fn load(conn: &Connection) -> Result<Self, Error> {
        let mut policies = Self::default();
        for row in rows::retention_policies::all(conn)? {
            match (row.mission_id, row.classification) {
                (Some(mission), _) => policies.of_mission.insert(mission, row.retention),
                (None, Some(class)) => policies
                    .of_class
                    .insert((row.group_id, class.as_str()), row.retention),
                (None, None) => policies.of_group.insert(row.group_id, row.retention),
            };
        }
        Ok(policies)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.of_group.is_empty() && self.of_mission.is_empty() && self.of_class.is_empty()
    }

    /// Every policy that may govern some artifact of a Mission: its own, else its
    /// classifications' and its Group's (what `candidates` asks: could any be due?).
    pub(super) fn any_of(&self, group: &Id, mission: &Id) -> Vec<Retention> {
        if let Some(retention) = self.of_mission.get(mission) {
            return vec![*retention];
        }
        self.of_class
            .iter()
            .filter(|((of, _), _)| of == group)
            .map(|(_, retention)| *retention)
            .chain(self.of_group.get(group).copied())
            .collect()
    }

    /// The policy an artifact of a Mission (of a classification, for a manifest) follows, and
    /// how to name it: the Mission's, else its classification's, else its Group's.
    pub(super) fn of(
        &self,
        group: &Id,
        mission: &Id,
        class: Option<Classification>,
    ) -> Option<(Retention, String)> {
        let describe = |what: String, retention: &Retention| {
            let mut text = what;
            if let Some(bytes) = retention.keep_bytes_seconds {
                text.push_str(&format!(" keep-bytes {}", format_duration(bytes)));
            }
            if let Some(records) = retention.keep_records_seconds {
                text.push_str(&format!(" keep-records {}", format_duration(records)));
            }
            text
        };
        if let Some(retention) = self.of_mission.get(mission) {
            return Some((
                *retention,
                describe(format!("mission {mission}"), retention),
            ));
        }
        if let Some(class) = class
            && let Some(retention) = self.of_class.get(&(group.clone(), class.as_str()))
        {
            return Some((
                *retention,
                describe(
                    format!("{} artifacts of group {group}", class.as_str()),
                    retention,
                ),
            ));
        }
        self.of_group
            .get(group)
            .map(|retention| (*retention, describe(format!("group {group}"), retention)))
    }
}

/// The blobs the holds in force keep, recomputed when the holds change: each hold's seeds
/// (its artifact; what its WorkItem or Mission published or its Evidence cites) and every
/// ancestor of them through `derivedFrom`. Bytes are kept by any hold (every Group that
/// published them reads the same bytes); a Group's records only by the holds whose Events it
/// has, its own approvers' and the operator's placed in it ([`HeldCache::holds_blob_for`]):
/// another Group's hold on bytes both published does not keep its records past its policy
/// unseen.
#[derive(Default)]
pub(super) struct HeldCache {
    holds: Vec<Id>,
    blobs: BTreeSet<ArtifactId>,
    /// The blobs the holds keep, by whose records they keep: a Group's (its approvers' holds
    /// and the operator's placed in it), or every Group's (`None`: the operator's placed
    /// before the Groups a hold was placed in were kept).
    by_placer: BTreeMap<Option<Id>, BTreeSet<ArtifactId>>,
    /// The WorkItems and Missions holds name (their records are kept, `records.rs`).
    /// (Mission, WorkItem): a WorkItem id is unique only within its Mission.
    work_items: BTreeSet<(String, String)>,
    missions: BTreeSet<Id>,
}

impl HeldCache {
    /// Whether a hold in force names WorkItem `work_item` or Mission `mission` (as of the
    /// last [`HeldCache::refresh`]).
    pub(super) fn holds_work(&self, mission: &Id, work_item: &str) -> bool {
        self.missions.contains(mission)
            || self
                .work_items
                .contains(&(mission.to_string(), work_item.to_owned()))
    }

    /// Whether the holds of Group `group` (its approvers', the operator's placed in it) reach
    /// blob `blob` (as of the last [`HeldCache::refresh`]): what keeps its records of it.
    pub(super) fn holds_blob_for(&self, group: &Id, blob: &ArtifactId) -> bool {
        [None, Some(group.clone())].iter().any(|placer| {
            self.by_placer
                .get(placer)
                .is_some_and(|blobs| blobs.contains(blob))
        })
    }

    pub(super) fn refresh(&mut self, conn: &Connection) -> Result<&BTreeSet<ArtifactId>, Error> {
        let holds = rows::holds::in_force(conn)?;
        let ids: Vec<Id> = holds.iter().map(|hold| hold.hold_id.clone()).collect();
        if ids == self.holds && !ids.is_empty() {
            return Ok(&self.blobs);
        }
        let mut seeds_of: BTreeMap<Option<Id>, Vec<ArtifactId>> = BTreeMap::new();
        let (mut work_items, mut missions) = (BTreeSet::new(), BTreeSet::new());
        for hold in &holds {
            let mut seeds = Vec::new();
            match &hold.target {
                HoldTarget::Artifact(artifact) => seeds.push(*artifact),
                HoldTarget::WorkItemId(work_item) => {
                    if let Some((_, mission)) = rows::work_items::place(conn, work_item.as_str())? {
                        work_items.insert((mission.clone(), work_item.to_string()));
                        seeds.extend(rows::manifests::blobs_of(
                            conn,
                            &mission,
                            Some(work_item.as_str()),
                        )?);
                        seeds.extend(rows::evidence::cited_by(
                            conn,
                            &mission,
                            Some(work_item.as_str()),
                        )?);
                    }
                }
                HoldTarget::MissionId(mission) => {
                    missions.insert(mission.clone());
                    seeds.extend(rows::manifests::blobs_of(conn, mission.as_str(), None)?);
                    seeds.extend(rows::evidence::cited_by(conn, mission.as_str(), None)?);
                }
            }
            // Whose records it keeps: an approver's Group's; the operator's, the Groups it
            // was placed in (`rows/hold_groups.rs`), or every Group for one placed before
            // those were kept.
            let placers: Vec<Option<Id>> = match &hold.placed_in {
                Some((group, _)) => vec![Some(group.clone())],
                None => {
                    let groups = rows::hold_groups::of(conn, hold.hold_id.as_str())?;
                    match groups.is_empty() {
                        true => vec![None],
                        false => groups.into_iter().map(Some).collect(),
                    }
                }
            };
            for placer in placers {
                seeds_of
                    .entry(placer)
                    .or_default()
                    .extend(seeds.iter().copied());
            }
        }
        let mut by_placer = BTreeMap::new();
        for (placer, mut seeds) in seeds_of {
            let mut blobs = BTreeSet::new();
            while let Some(blob) = seeds.pop() {
                if blobs.insert(blob) {
                    seeds.extend(rows::derivations::sources_of(conn, &blob)?);
                }
            }
            by_placer.insert(placer, blobs);
        }
        self.holds = ids;
        self.blobs = by_placer.values().flatten().copied().collect();
        self.by_placer = by_placer;
        self.work_items = work_items;
        self.missions = missions;
        Ok(&self.blobs)
    }
}
