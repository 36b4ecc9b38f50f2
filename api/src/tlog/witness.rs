//! Witnesses of a transparency log (c2sp.org/tlog-witness, c2sp.org/tlog-cosignature; DESIGN
//! §15, issue #45), as pure rules: what a witness signs, how its line is written and checked,
//! the `add-checkpoint` request, and the witness's decision on one.
//!
//! - **Cosignature** (Ed25519, `cosignature/v1`): the witness signs
//!   `cosignature/v1\ntime <unix seconds>\n` followed by the checkpoint's text (origin, size,
//!   root and any extension lines); its note line carries the key id
//!   `SHA-256(name ‖ "\n" ‖ 0x04 ‖ key)[:4]`, then the 8-byte big-endian time and the 64-byte
//!   signature.
//! - **add-checkpoint**: `POST <witness>/add-checkpoint` with `old <size>\n`, one base64
//!   consistency-proof hash per line, an empty line, then the checkpoint note. The witness
//!   cosigns only a checkpoint its log signed whose tree extends the one it cosigned last
//!   ([`Decision`]): it never cosigns two views of one log, nor a smaller tree after a larger.
//! - **Policy**: a reader trusts a checkpoint when the Authority signed it and at least
//!   `quorum` of the witnesses it names cosigned it ([`open_witnessed`]).

use base64::Engine as _;
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use sha2::Digest as _;
use signed_note::Note;
use tlog_tiles::Checkpoint;

use super::{Proof, TreeHead, check_consistency, open_checkpoint};
use crate::error::{ErrorCode, Rejection};

/// The signature type byte of an Ed25519 cosignature.
const COSIGNATURE: u8 = 0x04;

/// The longest `add-checkpoint` body a witness reads (a note, and a proof of at most 63 hashes).
pub const MAX_REQUEST: usize = 16 * 1024;

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

/// A witness's cosignature key id under `name`.
pub fn cosignature_key_id(name: &str, key: &VerifyingKey) -> u32 {
    let mut hasher = sha2::Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update(b"\n");
    hasher.update([COSIGNATURE]);
    hasher.update(key.as_bytes());
    let digest = hasher.finalize();
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// `name+<key id>+<base64(0x04 ‖ key)>`: the witness's verifier key, as a policy names it.
pub fn witness_vkey(name: &str, key: &VerifyingKey) -> String {
    let mut bytes = vec![COSIGNATURE];
    bytes.extend_from_slice(key.as_bytes());
    format!(
        "{name}+{:08x}+{}",
        cosignature_key_id(name, key),
        b64().encode(bytes)
    )
}

/// A witness as a policy names it: its name and key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WitnessKey {
    pub name: String,
    pub key: VerifyingKey,
}

impl WitnessKey {
    /// Parses a witness verifier key (`name+id+base64(0x04 ‖ key)`), checking its id.
    pub fn parse(vkey: &str) -> Result<Self, Rejection> {
        let (name, id, key) =
            super::split_vkey(vkey, COSIGNATURE, "an Ed25519 cosignature key (type 0x04)")?;
        if format!("{:08x}", cosignature_key_id(&name, &key)) != id {
            return Err(Rejection::new(
                ErrorCode::BadRequest,
                "witness key: its id is not the key's",
            ));
        }
        Ok(Self { name, key })
    }
}

/// The bytes a cosignature signs at `time` over the checkpoint text `body`.
pub fn cosignature_message(time: u64, body: &[u8]) -> Vec<u8> {
    let mut message = format!("cosignature/v1\ntime {time}\n").into_bytes();
    message.extend_from_slice(body);
    message
}

/// The witness `name`'s cosignature line (`— name base64(id ‖ time ‖ sig)\n`) over the
/// checkpoint text `body` at `time`.
pub fn cosign(key: &SigningKey, name: &str, time: u64, body: &[u8]) -> String {
    let signature = key.sign(&cosignature_message(time, body));
    let mut blob = cosignature_key_id(name, &key.verifying_key())
        .to_be_bytes()
        .to_vec();
    blob.extend_from_slice(&time.to_be_bytes());
    blob.extend_from_slice(&signature.to_bytes());
    format!("— {name} {}\n", b64().encode(blob))
}

/// The checkpoint note `note` with the cosignature lines `lines` appended.
pub fn with_cosignatures(note: &str, lines: &[String]) -> String {
    let mut out = note.to_owned();
    for line in lines {
        out.push_str(line);
    }
    out
}

/// Checks `note` is `origin`'s checkpoint signed by `authority` and cosigned by at least
/// `quorum` of `witnesses` (each counted once); a line of a named witness that does not
/// verify refuses the note. Answers the tree, and the names of the witnesses that cosigned.
pub fn open_witnessed(
    note: &[u8],
    authority: &VerifyingKey,
    origin: &str,
    witnesses: &[WitnessKey],
    quorum: usize,
) -> Result<(TreeHead, Vec<String>), Rejection> {
    let head = open_checkpoint(note, authority, origin)?;
    let parsed = Note::from_bytes(note)
        .map_err(|_| Rejection::new(ErrorCode::BadRequest, "malformed signed note"))?;
    let body = parsed.text();
    let mut cosigned: Vec<String> = Vec::new();
    for line in parsed_signatures(note)? {
        let Some(witness) = witnesses
            .iter()
            .find(|w| w.name == line.0 && cosignature_key_id(&w.name, &w.key) == line.1)
        else {
            continue;
        };
        let blob = &line.2;
        let refused = || {
            Rejection::new(
                ErrorCode::BadSignature,
                format!("witness {}'s cosignature does not verify", witness.name),
            )
        };
        if blob.len() != 8 + 64 {
            return Err(refused());
        }
        let time = u64::from_be_bytes(blob[..8].try_into().map_err(|_| refused())?);
        crate::dsse::verify_detached(&witness.key, &cosignature_message(time, body), &blob[8..])
            .map_err(|_| refused())?;
        if !cosigned.contains(&witness.name) {
            cosigned.push(witness.name.clone());
        }
    }
    if cosigned.len() < quorum {
        return Err(Rejection::new(
            ErrorCode::BadSignature,
            format!(
                "{} of the named witnesses cosigned the checkpoint, the policy needs {quorum}",
                cosigned.len()
            ),
        ));
    }
    Ok((head, cosigned))
}

/// Each signature line of `note`: (name, key id, the signature bytes after the id).
fn parsed_signatures(note: &[u8]) -> Result<Vec<(String, u32, Vec<u8>)>, Rejection> {
    let bad = || Rejection::new(ErrorCode::BadRequest, "malformed signed note");
    let text = std::str::from_utf8(note).map_err(|_| bad())?;
    let (_, signatures) = text.rsplit_once("\n\n").ok_or_else(bad)?;
    signatures
        .lines()
        .map(|line| {
            let rest = line.strip_prefix("— ").ok_or_else(bad)?;
            let (name, blob) = rest.split_once(' ').ok_or_else(bad)?;
            let blob = b64().decode(blob).map_err(|_| bad())?;
            if blob.len() < 4 {
                return Err(bad());
            }
            let id = u32::from_be_bytes([blob[0], blob[1], blob[2], blob[3]]);
            Ok((name.to_owned(), id, blob[4..].to_vec()))
        })
        .collect()
}

/// An `add-checkpoint` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddCheckpoint {
    /// The size of the tree the witness cosigned last, as the log believes it.
    pub old: u64,
    /// The consistency proof from `old` to the checkpoint's size.
    pub proof: Vec<[u8; 32]>,
    /// The checkpoint note, the log's signature on it.
    pub note: Vec<u8>,
}

impl AddCheckpoint {
    pub fn to_body(&self) -> Vec<u8> {
        let mut body = format!("old {}\n", self.old).into_bytes();
        for hash in &self.proof {
            body.extend_from_slice(b64().encode(hash).as_bytes());
            body.push(b'\n');
        }
        body.push(b'\n');
        body.extend_from_slice(&self.note);
        body
    }

    pub fn parse(body: &[u8]) -> Result<Self, Rejection> {
        let bad =
            |why: &str| Rejection::new(ErrorCode::BadRequest, format!("add-checkpoint: {why}"));
        if body.len() > MAX_REQUEST {
            return Err(Rejection::new(
                ErrorCode::BodyTooLarge,
                "add-checkpoint: too long",
            ));
        }
        let text = std::str::from_utf8(body).map_err(|_| bad("not UTF-8"))?;
        let (head, note) = text
            .split_once("\n\n")
            .ok_or_else(|| bad("no empty line"))?;
        let mut lines = head.split('\n');
        let old = lines
            .next()
            .and_then(|l| l.strip_prefix("old "))
            .filter(|n| {
                !n.is_empty()
                    && n.bytes().all(|b| b.is_ascii_digit())
                    && (n.len() == 1 || !n.starts_with('0'))
            })
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| bad("the first line is not `old <size>`"))?;
        let proof = lines
            .map(|line| {
                let hash = b64()
                    .decode(line)
                    .map_err(|_| bad("a proof line is not base64"))?;
                hash.try_into()
                    .map_err(|_| bad("a proof hash is not 32 bytes"))
            })
            .collect::<Result<Vec<[u8; 32]>, Rejection>>()?;
        if proof.len() > 63 {
            return Err(bad("a proof of more than 63 hashes"));
        }
        Ok(Self {
            old,
            proof,
            note: note.as_bytes().to_vec(),
        })
    }
}

/// What a witness knows of one log: the tree it cosigned last.
pub type LogState = TreeHead;

/// A witness's answer to an `add-checkpoint`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Cosign: the new state to persist (before answering) and the checkpoint text to sign.
    Cosign { state: LogState, body: Vec<u8> },
    /// 409: the log's `old` is not the size the witness holds; it says which.
    Conflict { size: u64 },
    /// 403: no signature of the log's key.
    Unsigned,
    /// 422: the proof does not show the old tree is a prefix of the new.
    Inconsistent,
    /// 400: malformed, or a smaller tree than the old.
    Malformed(String),
}

/// The witness's decision on `request` for the log `origin` signed by `log_key`, having
/// cosigned `state` last (`None`: never).
pub fn decide(
    request: &AddCheckpoint,
    log_key: &VerifyingKey,
    origin: &str,
    state: Option<LogState>,
) -> Decision {
    let head = match open_checkpoint(&request.note, log_key, origin) {
        Ok(head) => head,
        Err(rejection) if rejection.code == ErrorCode::BadSignature => return Decision::Unsigned,
        Err(rejection) => return Decision::Malformed(rejection.message),
    };
    if request.old > head.size {
        return Decision::Malformed("old is larger than the checkpoint's size".into());
    }
    let known = state.map_or(0, |s| s.size);
    if request.old != known {
        return Decision::Conflict { size: known };
    }
    let old_root = match state {
        Some(s) => s.root,
        None => <[u8; 32]>::from(sha2::Sha256::digest([])),
    };
    let proof = Proof::new(head.size, None, &request.proof);
    let consistent = if known == head.size {
        request.proof.is_empty() && old_root == head.root
    } else {
        check_consistency(
            &proof,
            TreeHead {
                size: known,
                root: old_root,
            },
            head,
        )
        .is_ok()
    };
    if !consistent {
        return Decision::Inconsistent;
    }
    let Ok(parsed) = Note::from_bytes(&request.note) else {
        return Decision::Malformed("malformed signed note".into());
    };
    // The text the log signed, checked to be a checkpoint above.
    if Checkpoint::from_bytes(parsed.text()).is_err() {
        return Decision::Malformed("malformed checkpoint".into());
    }
    Decision::Cosign {
        state: head,
        body: parsed.text().to_vec(),
    }
}

pub mod served;

#[cfg(test)]
mod tests;
