//! Reading Context Packages: the latest version, all versions and one version, in the reader's
//! Group only. The Events a version cites (CTX-3) and its provenance need another feature each
//! (delivery, lineage), so they are composed in `compose/context.rs`.
//!
//! A package of another Group answers `not_found`, as one that does not exist (no existence
//! oracle). Visibility goes through the reader's Group as every other read does; a Mission
//! scope of the Membership (CTX-5) applies here once `Reader` carries it.

use crate::sql::Connection;
use base64::Engine as _;
use weft_api::context::{ContextPackage, ContextRecord, ContextVersions};
use weft_api::dsse::BASE64;
use weft_api::{ArtifactId, Envelope, ErrorCode, Id};

use crate::access::Reader;
use crate::context::handle::Context;
use crate::error::{Error, reject};
use crate::events::to32;

pub(super) fn no_package(package_id: &Id) -> Error {
    reject(
        ErrorCode::NotFound,
        format!("no Context Package {package_id} is visible to you"),
    )
}

/// One `context_packages` row: id, Group, sequence, forwarded from, envelope.
type Row = crate::rows::context_packages::Row;

fn to_record(
    (id, group_id, sequence, forwarded_from, envelope): Row,
) -> Result<ContextRecord, Error> {
    let envelope: Envelope = serde_json::from_str(&envelope).map_err(Error::backend)?;
    let payload = BASE64.decode(&envelope.payload).map_err(Error::backend)?;
    let package = ContextPackage::parse(&payload)?;
    Ok(ContextRecord {
        context_id: ArtifactId(to32(id)?),
        group_id: Id::parse("groupId", &group_id)?,
        sequence,
        forwarded_from: forwarded_from
            .map(|group| Id::parse("groupId", &group))
            .transpose()?,
        envelope,
        package,
    })
}

/// Version `version` (the latest when `None`) of `package_id` as indexed in `group_id`.
pub(super) fn version_row(
    conn: &Connection,
    group_id: &str,
    package_id: &str,
    version: Option<u64>,
) -> Result<Option<ContextRecord>, Error> {
    crate::rows::context_packages::version(conn, group_id, package_id, version)?
        .map(to_record)
        .transpose()
}

fn all_rows(
    conn: &Connection,
    group_id: &str,
    package_id: &str,
) -> Result<Vec<ContextRecord>, Error> {
    crate::rows::context_packages::versions(conn, group_id, package_id)?
        .into_iter()
        .map(to_record)
        .collect()
}

/// Where `reader` finds the package `id` names: `(Group, packageId, version)`. `id` is a
/// packageId, or a version's own id (`blake3:…`, then that version). A session looks in its
/// own Group; the operator in the Group the package was published in.
fn resolve(
    conn: &Connection,
    reader: &Reader,
    id: &Id,
) -> Result<Option<(String, String, Option<u64>)>, Error> {
    let Some(found) = locate(conn, reader, id)? else {
        return Ok(None);
    };
    // A Mission-scoped member sees the packages of its Missions only (CTX-5); another
    // Mission's answers as one that does not exist.
    if reader.sees_whole_group() {
        return Ok(Some(found));
    }
    let mission = crate::rows::context_packages::mission_of(conn, &found.0, &found.1)?;
    Ok(mission
        .is_some_and(|mission| reader.sees_mission(&found.0, &mission))
        .then_some(found))
}

/// [`resolve`] before the Mission scope.
fn locate(
    conn: &Connection,
    reader: &Reader,
    id: &Id,
) -> Result<Option<(String, String, Option<u64>)>, Error> {
    let own = match reader {
        Reader::Agent { group_id, .. } => Some(group_id.as_str()),
        Reader::Admin => None,
    };
    if let Ok(context_id) = ArtifactId::parse(id.as_str()) {
        return Ok(
            crate::rows::context_packages::locate(conn, &context_id, own)?
                .map(|(group, package, version)| (group, package, Some(version))),
        );
    }
    let group: Option<String> = match own {
        Some(group) => Some(group.to_owned()),
        None => crate::rows::context_packages::group_of(conn, id.as_str())?,
    };
    Ok(group.map(|group| (group, id.to_string(), None)))
}

impl Context<'_> {
    /// Version `version` of a package in the reader's Group (the latest when `None`).
    pub async fn context_version(
        &self,
        package_id: Id,
        version: Option<u64>,
        reader: &Reader,
    ) -> Result<ContextRecord, Error> {
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                let Some((group, package, named)) = resolve(conn, &reader, &package_id)? else {
                    return Err(no_package(&package_id));
                };
                version_row(conn, &group, &package, version.or(named))?
                    .ok_or_else(|| no_package(&package_id))
            })
            .await
    }

    /// Every version of a package in the reader's Group, oldest first.
    pub async fn context_versions(
        &self,
        package_id: Id,
        reader: &Reader,
    ) -> Result<ContextVersions, Error> {
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                let Some((group, package, _)) = resolve(conn, &reader, &package_id)? else {
                    return Err(no_package(&package_id));
                };
                let versions = all_rows(conn, &group, &package)?;
                if versions.is_empty() {
                    return Err(no_package(&package_id));
                }
                Ok(ContextVersions {
                    package_id: Id::parse("packageId", &package)?,
                    versions,
                })
            })
            .await
    }
}

/// fsck: every indexed version's payload hashes to its id and is signed by a key its generator
/// had, and a version after 1 names a previous version indexed in the same Group.
pub(crate) fn check_rows(conn: &Connection) -> Result<Vec<String>, Error> {
    let rows = crate::rows::context_packages::all_with_previous(conn)?;
    let mut problems = Vec::new();
    for (row, previous) in rows {
        let (id, group) = (row.0.clone(), row.1.clone());
        let name = ArtifactId(to32(id)?);
        let record = match to_record(row) {
            Ok(record) => record,
            Err(error) => {
                problems.push(format!("context {name} in {group}: unreadable ({error})"));
                continue;
            }
        };
        let signed = record
            .envelope
            .signer_keyid()
            .ok()
            .and_then(|keyid| crate::access::recorded_key(conn, &keyid).ok().flatten())
            .filter(|(agent, _)| *agent == record.package.generator.agent_id)
            .and_then(|(_, key)| {
                record
                    .envelope
                    .verify(weft_api::context::CONTEXT_TYPE, &key)
                    .ok()
            });
        match signed {
            Some(payload) if ArtifactId::of(payload.value()) == name => {}
            Some(_) => problems.push(format!(
                "context {name} in {group}: payload does not hash to its id"
            )),
            None => problems.push(format!(
                "context {name} in {group}: not signed by its generator's key"
            )),
        }
        for artifact in &record.package.artifacts {
            if !crate::rows::context_package_artifacts::cites(conn, &name, artifact)? {
                problems.push(format!(
                    "context {name} in {group}: cites {artifact} without its citation row \
                     (collection would not keep it)"
                ));
            }
        }
        if let Some(previous) = previous {
            let found = crate::rows::context_packages::version_of_id(conn, &group, &previous)?;
            if found.is_none() && record.forwarded_from.is_none() {
                problems.push(format!(
                    "context {name} in {group}: previous version is not indexed"
                ));
            }
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::SigningKey;
    use serde_json::json;
    use weft_api::KeyId;

    use super::*;

    /// fsck's context check: a row signed by its generator's recorded key passes; one whose
    /// signer is not the generator, or whose id is not its payload's, is reported.
    #[test]
    fn fsck_reports_a_context_row_that_is_not_what_it_claims() {
        let conn = Connection::open_in_memory().expect("database");
        crate::schema::migrate(&conn).expect("schema");
        // Rows stand alone here (no Group or Agent rows).
        conn.execute_batch("PRAGMA foreign_keys = OFF")
            .expect("pragma");
        let key = SigningKey::from_bytes(&[7; 32]);
        crate::rows::agent_keys::insert(
            &conn,
            KeyId::of(&key.verifying_key()).as_str(),
            "a1",
            key.verifying_key().as_bytes(),
            "now",
        )
        .expect("key");
        let payload = |agent: &str, package: &str| {
            json!({
                "packageId": package, "version": 1, "previous": null, "groupId": "g1",
                "missionId": "m1", "workItemId": null, "sourceEvents": {"from": 1, "to": 1},
                "artifacts": [], "decisions": [], "constraints": [], "openQuestions": [],
                "generator": {"agentId": agent, "agentCardVersion": "1"},
                "createdAt": "2026-11-30T12:00:00Z"
            })
            .to_string()
        };
        let insert = |package: &str, payload: &str, id: ArtifactId| {
            let envelope =
                Envelope::sign(&key, weft_api::context::CONTEXT_TYPE, payload.as_bytes());
            let envelope = serde_json::to_string(&envelope).expect("json");
            crate::rows::context_packages::insert(
                &conn,
                &crate::rows::context_packages::New {
                    context_id: &id,
                    group_id: "g1",
                    package_id: package,
                    version: 1,
                    previous: None,
                    mission_id: "m1",
                    work_item_id: None,
                    events_from: 1,
                    events_to: 1,
                    artifacts: "[]",
                    generator: "a1",
                    envelope: &envelope,
                    sequence: 1,
                    forwarded: None,
                },
            )
            .expect("row");
        };
        let good = payload("a1", "good");
        insert("good", &good, ArtifactId::of(good.as_bytes()));
        assert_eq!(check_rows(&conn).expect("check"), Vec::<String>::new());
        // A version whose signed payload cites an artifact its citation rows do not name
        // (V41: collection asks the rows).
        let cited = ArtifactId::of(b"cited bytes");
        let citing = payload("a1", "citing")
            .replace("\"artifacts\":[]", &format!("\"artifacts\":[\"{cited}\"]"));
        assert!(citing.contains(&cited.to_string()), "{citing}");
        insert("citing", &citing, ArtifactId::of(citing.as_bytes()));
        let problems = check_rows(&conn).expect("check");
        assert!(
            problems.len() == 1 && problems[0].contains("without its citation row"),
            "{problems:?}"
        );
        crate::rows::context_package_artifacts::insert(
            &conn,
            &ArtifactId::of(citing.as_bytes()),
            &[cited],
        )
        .expect("cited");
        assert_eq!(check_rows(&conn).expect("check"), Vec::<String>::new());
        let impostor = payload("a2", "impostor");
        insert("impostor", &impostor, ArtifactId::of(impostor.as_bytes()));
        let renamed = payload("a1", "renamed");
        insert("renamed", &renamed, ArtifactId::of(b"other bytes"));
        let problems = check_rows(&conn).expect("check");
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|p| p.contains("not signed by its generator's key")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("does not hash to its id")),
            "{problems:?}"
        );
    }
}
