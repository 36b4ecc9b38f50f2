//! Each Group's log as a C2SP transparency log (DESIGN §15, issue #45): pure rules, no I/O.
//!
//! - **Leaves** are the Events' canonical bytes (`event::Unhashed::canonical_bytes`, the bytes
//!   the BLAKE3 chain hashes), leaf index = sequence − 1, hashed as RFC 6962 says
//!   (`SHA-256(0x00 ‖ leaf)`, nodes `SHA-256(0x01 ‖ left ‖ right)`). The chain shows order;
//!   the tree lets an auditor check one Event, or that two heads are one history, in O(log n).
//! - **Origin**: `weft/<16 hex of the Authority keyid>/<groupId>`: one log per Group, and two
//!   Authorities that both have a Group `g1` still name two logs.
//! - **Checkpoint**: the C2SP tlog-checkpoint body (origin, size, base64 root) in a C2SP signed
//!   note, signed by the Authority key under the origin as key name (an Ed25519 note
//!   signature, algorithm byte 0x01). Signing is deterministic, so one size always gives the
//!   same note bytes. Notes are signed and verified here with weft's one Ed25519 policy
//!   (`verify_strict`, `dsse::verify_detached`), not with `signed_note`'s own key types.
//! - **Tiles**: height 8, C2SP paths `tile/<L>/<N>[.p/<W>]` and `tile/entries/<N>[.p/<W>]`;
//!   [`tile_of_path`] maps one onto `tlog_tiles`' coordinates (which spell Go's sumdb paths).
//!   An entry bundle is each leaf as a big-endian u16 length and its bytes.
//! - **Proofs** on the API are `{"treeSize", "leafIndex"?, "hashes": [base64…]}` (DESIGN §15);
//!   [`check_inclusion`] and [`check_consistency`] verify them with `tlog_tiles`.

use base64::Engine as _;
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use signed_note::{Note, Signature as NoteSignature, Verifier, VerifierList};
use tlog_tiles::{Checkpoint, Hash, Tile};

use crate::dsse::KeyId;
use crate::error::{ErrorCode, Rejection};

/// The tiles' height: 256 hashes per full tile (C2SP tlog-tiles fixes it).
pub const TILE_HEIGHT: u8 = 8;

/// Leaves per full tile.
pub const TILE_WIDTH: u64 = 1 << TILE_HEIGHT;

/// The longest leaf an entry bundle can hold (its length is a u16).
pub const MAX_ENTRY: usize = u16::MAX as usize;

/// Ed25519 in a signed note's key id and signature (c2sp.org/signed-note).
const ALG_ED25519: u8 = 0x01;

/// The origin line of Group `group_id`'s log under the Authority key `authority`.
pub fn origin(authority: &VerifyingKey, group_id: &str) -> String {
    let keyid = KeyId::of(authority);
    let hex = keyid.as_str().trim_start_matches("ed25519:");
    format!("weft/{}/{group_id}", &hex[..16])
}

/// RFC 6962 leaf hash of one Event's canonical bytes.
pub fn leaf_hash(canonical: &[u8]) -> [u8; 32] {
    tlog_tiles::record_hash(canonical).0
}

/// The key id a signed note gives `key` under `name`: the first four bytes of
/// `SHA-256(name ‖ "\n" ‖ 0x01 ‖ key)`.
pub fn note_key_id(name: &str, key: &VerifyingKey) -> u32 {
    signed_note::key_id(name, &note_public_key(key))
}

/// `name+<key id hex>+<base64(0x01 ‖ key)>`: the verifier key a Go or C2SP tool takes.
pub fn verifier_key(name: &str, key: &VerifyingKey) -> String {
    format!(
        "{name}+{:08x}+{}",
        note_key_id(name, key),
        base64::engine::general_purpose::STANDARD.encode(note_public_key(key))
    )
}

/// Parses a log's verifier key (`name+id+base64(0x01 ‖ key)`), checking its id: the log's
/// origin and the Authority key it signs with.
pub fn parse_verifier_key(vkey: &str) -> Result<(String, VerifyingKey), Rejection> {
    let (name, id, key) = split_vkey(vkey, ALG_ED25519, "an Ed25519 note key (type 0x01)")?;
    if format!("{:08x}", note_key_id(&name, &key)) != id {
        return Err(Rejection::new(
            ErrorCode::BadRequest,
            "verifier key: its id is not the key's",
        ));
    }
    Ok((name, key))
}

/// A verifier key's name, id (as written) and Ed25519 key, its type byte `kind`; the id is
/// the caller's to check (notes and cosignatures derive it differently).
pub(crate) fn split_vkey(
    vkey: &str,
    kind: u8,
    what: &str,
) -> Result<(String, String, VerifyingKey), Rejection> {
    let bad = |why: &str| Rejection::new(ErrorCode::BadRequest, format!("verifier key: {why}"));
    let (name, rest) = vkey.split_once('+').ok_or_else(|| bad("not name+id+key"))?;
    let (id, key) = rest.split_once('+').ok_or_else(|| bad("not name+id+key"))?;
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '+') {
        return Err(bad("a name without spaces or '+'"));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(key)
        .map_err(|_| bad("the key is not base64"))?;
    let (&found, key) = bytes.split_first().ok_or_else(|| bad("empty key"))?;
    if found != kind {
        return Err(bad(&format!("not {what}")));
    }
    let key: [u8; 32] = key.try_into().map_err(|_| bad("not 32 bytes"))?;
    // The one key policy: a point, not of small order.
    let key = crate::dsse::parse_public_key(&crate::dsse::BASE64.encode(key))?;
    Ok((name.to_owned(), id.to_owned(), key))
}

fn note_public_key(key: &VerifyingKey) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(33);
    bytes.push(ALG_ED25519);
    bytes.extend_from_slice(key.as_bytes());
    bytes
}

/// A tree's right edge, grown one leaf at a time: its RFC 6962 root at any size in O(log n)
/// memory (a client recomputing the root of the log it downloaded).
#[derive(Clone, Debug, Default)]
pub struct Frontier {
    size: u64,
    /// The roots of the perfect subtrees the leaves so far make, largest (leftmost) first.
    edge: Vec<[u8; 32]>,
}

impl Frontier {
    /// Adds the leaf whose hash is `leaf`.
    pub fn push(&mut self, leaf: [u8; 32]) {
        let mut hash = leaf;
        let mut size = self.size;
        while size & 1 == 1 {
            let Some(left) = self.edge.pop() else { break };
            hash = tlog_tiles::node_hash(Hash(left), Hash(hash)).0;
            size >>= 1;
        }
        self.edge.push(hash);
        self.size += 1;
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The root of the leaves so far (SHA-256 of nothing for none).
    pub fn root(&self) -> [u8; 32] {
        let mut edge = self.edge.iter().rev();
        let Some(&last) = edge.next() else {
            return tlog_tiles::EMPTY_HASH.0;
        };
        edge.fold(last, |right, left| {
            tlog_tiles::node_hash(Hash(*left), Hash(right)).0
        })
    }
}

/// A signed checkpoint, checked: the tree it commits to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeHead {
    pub size: u64,
    pub root: [u8; 32],
}

/// The checkpoint of `origin` at `head`, as a signed note by `key` (the Authority's).
pub fn sign_checkpoint(
    key: &SigningKey,
    origin: &str,
    head: TreeHead,
) -> Result<String, Rejection> {
    let body = Checkpoint::new(origin, head.size, Hash(head.root), "")
        .map_err(|_| Rejection::new(ErrorCode::BadRequest, "origin is not a checkpoint origin"))?
        .to_bytes();
    let id = note_key_id(origin, &key.verifying_key());
    let signature = NoteSignature::new(origin.to_owned(), id, key.sign(&body).to_bytes().to_vec())
        .map_err(|_| malformed("checkpoint origin (not a key name)"))?;
    let note = Note::new(&body, &[signature]).map_err(|_| malformed("checkpoint text"))?;
    String::from_utf8(note.to_bytes()).map_err(|_| malformed("checkpoint note"))
}

/// Checks `note` is `origin`'s checkpoint signed by `authority` (other signatures, a
/// witness's cosignatures, are ignored here) and returns the tree it commits to.
pub fn open_checkpoint(
    note: &[u8],
    authority: &VerifyingKey,
    origin: &str,
) -> Result<TreeHead, Rejection> {
    let parsed = Note::from_bytes(note).map_err(|_| malformed("signed note"))?;
    let verifier = NoteVerifier {
        name: origin.to_owned(),
        id: note_key_id(origin, authority),
        key: *authority,
    };
    parsed
        .verify(&VerifierList::new(vec![Box::new(verifier)]))
        .map_err(|_| {
            Rejection::new(
                ErrorCode::BadSignature,
                "the checkpoint is not signed by the Authority under its origin",
            )
        })?;
    let checkpoint = Checkpoint::from_bytes(parsed.text()).map_err(|_| malformed("checkpoint"))?;
    if checkpoint.origin() != origin {
        return Err(Rejection::new(
            ErrorCode::BadSignature,
            format!("the checkpoint's origin is not {origin}"),
        ));
    }
    Ok(TreeHead {
        size: checkpoint.size(),
        root: checkpoint.hash().0,
    })
}

fn malformed(what: &str) -> Rejection {
    Rejection::new(ErrorCode::BadRequest, format!("malformed {what}"))
}

struct NoteVerifier {
    name: String,
    id: u32,
    key: VerifyingKey,
}

impl Verifier for NoteVerifier {
    fn name(&self) -> &str {
        &self.name
    }
    fn key_id(&self) -> u32 {
        self.id
    }
    fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        crate::dsse::verify_detached(&self.key, msg, sig).is_ok()
    }
}

/// An inclusion or consistency proof as the API serves it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Proof {
    pub tree_size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaf_index: Option<u64>,
    pub hashes: Vec<String>,
}

impl Proof {
    pub fn new(tree_size: u64, leaf_index: Option<u64>, hashes: &[[u8; 32]]) -> Self {
        Self {
            tree_size,
            leaf_index,
            hashes: hashes
                .iter()
                .map(|h| base64::engine::general_purpose::STANDARD.encode(h))
                .collect(),
        }
    }

    /// The proof's hashes as bytes; each must be base64 of exactly 32 bytes.
    pub fn hash_bytes(&self) -> Result<Vec<[u8; 32]>, Rejection> {
        self.hashes
            .iter()
            .map(|text| {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_err(|_| malformed("proof hash"))?;
                bytes
                    .try_into()
                    .map_err(|_| malformed("proof hash (not 32 bytes)"))
            })
            .collect()
    }

    fn decoded(&self) -> Result<Vec<Hash>, Rejection> {
        Ok(self.hash_bytes()?.into_iter().map(Hash).collect())
    }
}

fn invalid_proof() -> Rejection {
    Rejection::new(ErrorCode::BadSignature, "the proof does not verify")
}

/// Checks that `proof` shows the leaf `leaf` at `proof.leafIndex` in the tree `head`.
pub fn check_inclusion(proof: &Proof, leaf: [u8; 32], head: TreeHead) -> Result<(), Rejection> {
    let index = proof
        .leaf_index
        .ok_or_else(|| malformed("inclusion proof (no leafIndex)"))?;
    if proof.tree_size != head.size || index >= head.size {
        return Err(invalid_proof());
    }
    tlog_tiles::check_record(
        &proof.decoded()?,
        head.size,
        Hash(head.root),
        index,
        Hash(leaf),
    )
    .map_err(|_| invalid_proof())
}

/// Checks that `proof` shows the tree `old` is a prefix of the tree `new`.
pub fn check_consistency(proof: &Proof, old: TreeHead, new: TreeHead) -> Result<(), Rejection> {
    if proof.tree_size != new.size || old.size > new.size {
        return Err(invalid_proof());
    }
    if old.size == 0 {
        // Every tree extends the empty one, and no proof is needed to say so.
        return if proof.hashes.is_empty() {
            Ok(())
        } else {
            Err(invalid_proof())
        };
    }
    tlog_tiles::check_tree(
        &proof.decoded()?,
        new.size,
        Hash(new.root),
        old.size,
        Hash(old.root),
    )
    .map_err(|_| invalid_proof())
}

/// The tile a C2SP path names (`tile/<L>/<N>[.p/<W>]` or `tile/entries/<N>[.p/<W>]`, written
/// exactly as the spec spells it), or `None` for anything else. Parsed here, not by
/// `Tile::from_path`, which panics on a width of 0.
pub fn tile_of_path(path: &str) -> Option<Tile> {
    let rest = path.strip_prefix("tile/")?;
    let (level, is_data, rest) = match rest.strip_prefix("entries/") {
        Some(rest) => (0u8, true, rest),
        None => {
            let (level, rest) = rest.split_once('/')?;
            let level: u8 = decimal(level)?.try_into().ok()?;
            (level, false, rest)
        }
    };
    let (index, width) = match rest.split_once(".p/") {
        Some((index, width)) => (index, u32::try_from(decimal(width)?).ok()?),
        None => (rest, 1 << TILE_HEIGHT),
    };
    if level >= 64 || !(1..=1 << TILE_HEIGHT).contains(&width) {
        return None;
    }
    let mut n: u64 = 0;
    let parts: Vec<&str> = index.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        let digits = if i + 1 < parts.len() {
            part.strip_prefix('x')?
        } else {
            part
        };
        if digits.len() != 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        n = n.checked_mul(1000)?.checked_add(digits.parse().ok()?)?;
    }
    let tile = Tile::new(TILE_HEIGHT, level, n, width, is_data);
    // One spelling per tile: `x000/001` is not `001`.
    (path_of_tile(&tile) == path).then_some(tile)
}

/// A decimal number without sign or leading zeros.
fn decimal(text: &str) -> Option<u64> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}

/// The C2SP path of `tile` (the inverse of [`tile_of_path`]).
pub fn path_of_tile(tile: &Tile) -> String {
    let go = tile.path();
    let prefix = format!("tile/{TILE_HEIGHT}/");
    let rest = go.strip_prefix(&prefix).unwrap_or(&go);
    match rest.strip_prefix("data/") {
        Some(index) => format!("tile/entries/{index}"),
        None => format!("tile/{rest}"),
    }
}

/// The C2SP path of hash tile `index` of `level`, `width` wide (256: full).
pub fn hash_tile_path(level: u8, index: u64, width: u64) -> String {
    let width = u32::try_from(width.clamp(1, TILE_WIDTH)).unwrap_or(1 << TILE_HEIGHT);
    path_of_tile(&Tile::new(TILE_HEIGHT, level.min(63), index, width, false))
}

/// Appends one leaf to an entry bundle; `None` when it is too long for one (over 65,535 bytes).
pub fn push_entry(bundle: &mut Vec<u8>, leaf: &[u8]) -> Option<()> {
    let length = u16::try_from(leaf.len()).ok()?;
    bundle.extend_from_slice(&length.to_be_bytes());
    bundle.extend_from_slice(leaf);
    Some(())
}

pub mod witness;

#[cfg(test)]
mod tests;
