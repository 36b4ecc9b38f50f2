//! Lineage queries as the engine runs them: the reader's Groups from the membership
//! projection, the root resolved (a `sha256:` alias by one indexed read), and the walk over
//! the index (`lineage_index/`) run inline within its budget or on the blocking pool.

use std::sync::Arc;

use weft_api::{ArtifactId, Digest, ErrorCode, Id};

use crate::access::{MissionScope, Reader};
use crate::artifacts::blob_row;
use crate::error::{Error, reject};
use crate::lineage::handle::Lineage as Handle;
use crate::lineage_index::{Audience, Direction, FastSet, Index, Lineage, Query, Scope};

impl Handle<'_> {
    /// The blake3 id named by `digest` and the reader's Groups (`None`: all), for lineage.
    /// Whether the reader may see the artifact is the lineage index's answer (it holds every
    /// published artifact's Groups), so a `blake3:` name costs no database read; a `sha256:`
    /// alias is looked up.
    pub(crate) async fn resolve_for_lineage(
        &self,
        digest: Digest,
        reader: &Reader,
    ) -> Result<(ArtifactId, Audience), Error> {
        let id = match digest {
            Digest::Blake3(id) => Some(id),
            Digest::Sha256(_) => {
                self.0
                    .db
                    .read(move |conn| {
                        Ok(blob_row(conn, &digest)?.map(|(digests, _)| digests.blake3))
                    })
                    .await?
            }
        };
        // The reader's audience is read whether or not the alias names a blob: an unknown
        // alias costs what another Group's does (issue #40).
        let audience = self.audience(reader).await?;
        let id = id.ok_or_else(|| {
            reject(
                ErrorCode::NotFound,
                format!("no artifact {digest} is visible to you"),
            )
        })?;
        Ok((id, audience))
    }

    /// Who `reader` is to the lineage index: its Groups, and for a Mission-scoped member its
    /// Missions and its Group's reusable artifacts (one read; none for anyone else).
    pub(crate) async fn audience(&self, reader: &Reader) -> Result<Audience, Error> {
        let groups = reader.visible_groups();
        let (group_id, missions) = match reader {
            Reader::Agent {
                group_id,
                scope: MissionScope::Missions(missions),
                ..
            } => (group_id.to_string(), missions.clone()),
            _ => return Ok(Audience::of_groups(groups.as_deref())),
        };
        let reusable = self
            .0
            .db
            .read(move |conn| {
                Ok(crate::rows::reusable_artifacts::of_group(conn, &group_id)?
                    .into_iter()
                    .collect::<FastSet<_>>())
            })
            .await?;
        Ok(Audience {
            groups,
            missions: Some(missions.into_iter().collect()),
            reusable,
        })
    }

    /// Ancestors and/or descendants of an artifact, bounded by depth, limit and a time budget,
    /// from the in-memory lineage index (DESIGN §6). `None` if the artifact is not visible.
    ///
    /// The walk follows the manifests of one Mission (issue #50: content addressing must not
    /// merge provenance): the one `query.mission` names, or else the only Mission the reader
    /// sees the artifact published in; bytes published in several Missions need the question
    /// to name one (`bad_request` lists them), and the root's manifests say where else the
    /// same bytes were published. A walk of descendants only (what was made from these bytes:
    /// impact, `GET /v1/provenance/impact`) follows every Mission unless one is named: what
    /// must be re-checked when bytes turn out bad is everything made from them.
    pub async fn lineage(
        &self,
        digest: Digest,
        mut query: Query,
        reader: &Reader,
    ) -> Result<Lineage, Error> {
        let (id, audience) = self.resolve_for_lineage(digest, reader).await?;
        let missions = self.0.lineage.missions_of(&id, &audience);
        let ancestry = !matches!(query.direction, Direction::Descendants);
        match (&query.mission, missions.as_slice()) {
            (_, []) => {
                return Err(reject(
                    ErrorCode::NotFound,
                    format!("no artifact {digest} is visible to you"),
                ));
            }
            (None, _) if !ancestry => {}
            (None, [only]) => query.mission = Some(only.clone()),
            (None, several) => {
                return Err(reject(
                    ErrorCode::BadRequest,
                    format!(
                        "{digest} is published in Missions {}; name one with missionId (each \
                         Mission's manifests are their own provenance)",
                        several.join(", ")
                    ),
                ));
            }
            (Some(named), seen) if !seen.contains(named) => {
                return Err(reject(
                    ErrorCode::NotFound,
                    format!(
                        "{digest} is not published in Mission {named} as far as you may see \
                         (it is in {})",
                        seen.join(", ")
                    ),
                ));
            }
            (Some(_), _) => {}
        }
        self.walk_lineage(query, move |index, query| {
            index.traverse(&id, query, &audience)
        })
        .await?
        .ok_or_else(|| {
            reject(
                ErrorCode::NotFound,
                format!("no artifact {digest} is visible to you"),
            )
        })
    }

    /// Runs a lineage walk on this thread within the inline budget, and again on the blocking
    /// pool with the query's whole budget if that was not enough (see
    /// `Options::lineage_inline_budget`). A walk cut by time returns fewer artifacts than its
    /// limit; one cut by the limit returns exactly the limit.
    async fn walk_lineage(
        &self,
        query: Query,
        walk: impl Fn(&Index, &Query) -> Option<Lineage> + Send + 'static,
    ) -> Result<Option<Lineage>, Error> {
        if let Some(inline_budget) = self.0.lineage_inline_budget {
            let inline = Query {
                budget: query.budget.min(inline_budget),
                ..query.clone()
            };
            let answer = walk(&self.0.lineage, &inline);
            let cut_by_time = answer
                .as_ref()
                .is_some_and(|a| a.truncated && a.artifacts.len() < query.limit);
            if !cut_by_time || query.budget <= inline_budget {
                return Ok(answer);
            }
        }
        let inner = Arc::clone(self.0);
        tokio::task::spawn_blocking(move || walk(&inner.lineage, &query))
            .await
            .map_err(Error::backend)
    }

    /// Everything published inside a WorkItem or Mission and what it was derived from.
    pub async fn lineage_scope(
        &self,
        scope: Scope,
        name: Id,
        query: Query,
        reader: &Reader,
    ) -> Result<Lineage, Error> {
        let audience = self.audience(reader).await?;
        let scope_name = name.clone();
        let mut query = query;
        if scope == Scope::Mission {
            // A Mission's provenance is its own manifests' (issue #50).
            query.mission = Some(name.to_string());
        }
        self.walk_lineage(query, move |index, query| {
            index.scope(scope, scope_name.as_str(), query, &audience)
        })
        .await?
        .ok_or_else(|| {
            reject(
                ErrorCode::NotFound,
                format!("nothing published in {name} is visible to you"),
            )
        })
    }

    /// One shortest derivation path between two artifacts, or `no_path`.
    pub async fn lineage_path(
        &self,
        from: Digest,
        to: Digest,
        max_depth: u32,
        reader: &Reader,
    ) -> Result<Vec<ArtifactId>, Error> {
        let (from_digest, to_digest) = (from, to);
        let (from, audience) = self.resolve_for_lineage(from, reader).await?;
        let (to, _) = self.resolve_for_lineage(to, reader).await?;
        for (id, digest) in [(&from, from_digest), (&to, to_digest)] {
            if !self.0.lineage.sees(id, &audience) {
                return Err(reject(
                    ErrorCode::NotFound,
                    format!("no artifact {digest} is visible to you"),
                ));
            }
        }
        // A path search has no node limit (only `max_depth`) and may cover a large part of the
        // graph, so it always runs on the blocking pool.
        let inner = Arc::clone(self.0);
        tokio::task::spawn_blocking(move || inner.lineage.path(&from, &to, max_depth, &audience))
            .await
            .map_err(Error::backend)?
            .ok_or_else(|| {
                reject(
                    ErrorCode::NoPath,
                    format!(
                        "no derivation path of at most {max_depth} steps joins {from} and {to}"
                    ),
                )
            })
    }
}
