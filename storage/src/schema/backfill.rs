//! Migration steps SQL cannot do, in Rust, each run in its migration's transaction after
//! the migration's SQL (`schema.rs`, `BACKFILLS`).

use rusqlite::Connection;

use crate::error::Error;

/// V29: every stored manifest's file name, read from its signed payload.
pub(super) fn names(conn: &Connection) -> Result<(), Error> {
    use base64::Engine as _;
    let mut named: Vec<(Vec<u8>, String)> = Vec::new();
    {
        let mut select = conn.prepare("SELECT manifest_id, envelope FROM manifests")?;
        let mut rows = select.query([])?;
        while let Some(row) = rows.next()? {
            let id: Vec<u8> = row.get(0)?;
            let envelope: String = row.get(1)?;
            let Ok(envelope) = serde_json::from_str::<weft_api::Envelope>(&envelope) else {
                continue;
            };
            let Ok(payload) = weft_api::dsse::BASE64.decode(&envelope.payload) else {
                continue;
            };
            let Ok(manifest) = weft_api::Manifest::parse(&payload) else {
                continue;
            };
            if let Some(name) = manifest.file_name() {
                named.push((id, name.to_owned()));
            }
        }
    }
    let mut update = conn.prepare("UPDATE manifests SET name = ?2 WHERE manifest_id = ?1")?;
    for (id, name) in named {
        update.execute(rusqlite::params![id, name])?;
    }
    Ok(())
}
