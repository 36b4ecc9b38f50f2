//! The witness's rules: a cosignature line verifies under its policy and not under another
//! key or name; `add-checkpoint` bodies round-trip and refuse malformed ones; a witness
//! cosigns only an extension of what it cosigned last (never a fork, never a rollback).

use super::*;
use crate::tlog::{leaf_hash, origin as log_origin, sign_checkpoint};

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// RFC 6962 roots and consistency proofs of a small tree, written from the RFC.
fn mth(leaves: &[[u8; 32]]) -> [u8; 32] {
    match leaves.len() {
        0 => sha2::Sha256::digest([]).into(),
        1 => leaves[0],
        n => {
            let k = n.next_power_of_two() / 2;
            let mut h = sha2::Sha256::new();
            h.update([1u8]);
            h.update(mth(&leaves[..k]));
            h.update(mth(&leaves[k..]));
            h.finalize().into()
        }
    }
}

fn subproof(m: usize, leaves: &[[u8; 32]], complete: bool) -> Vec<[u8; 32]> {
    let n = leaves.len();
    if m == n {
        return if complete {
            Vec::new()
        } else {
            vec![mth(leaves)]
        };
    }
    let k = n.next_power_of_two() / 2;
    if m <= k {
        let mut p = subproof(m, &leaves[..k], complete);
        p.push(mth(&leaves[k..]));
        p
    } else {
        let mut p = subproof(m - k, &leaves[k..], false);
        p.push(mth(&leaves[..k]));
        p
    }
}

struct Log {
    key: SigningKey,
    origin: String,
    leaves: Vec<[u8; 32]>,
}

impl Log {
    fn new() -> Self {
        let key = key(1);
        let origin = log_origin(&key.verifying_key(), "g1");
        Self {
            key,
            origin,
            leaves: Vec::new(),
        }
    }
    fn grow(&mut self, n: usize) {
        for _ in 0..n {
            let i = self.leaves.len() as u32;
            self.leaves.push(leaf_hash(&i.to_be_bytes()));
        }
    }
    fn head(&self, size: usize) -> TreeHead {
        TreeHead {
            size: size as u64,
            root: mth(&self.leaves[..size]),
        }
    }
    fn request(&self, old: usize, size: usize) -> AddCheckpoint {
        let proof = if old == 0 || old == size {
            Vec::new()
        } else {
            subproof(old, &self.leaves[..size], true)
        };
        AddCheckpoint {
            old: old as u64,
            proof,
            note: sign_checkpoint(&self.key, &self.origin, self.head(size))
                .expect("sign")
                .into_bytes(),
        }
    }
}

#[test]
fn a_witness_cosigns_extensions_and_nothing_else() {
    let mut log = Log::new();
    log.grow(5);
    let log_key = log.key.verifying_key();
    // First contact: from the empty tree.
    let Decision::Cosign { state, body } = decide(&log.request(0, 5), &log_key, &log.origin, None)
    else {
        panic!("the first checkpoint is cosigned");
    };
    assert_eq!(state, log.head(5));
    assert!(body.starts_with(log.origin.as_bytes()));
    // The same size again, and an extension with its proof: cosigned.
    assert!(matches!(
        decide(&log.request(5, 5), &log_key, &log.origin, Some(state)),
        Decision::Cosign { .. }
    ));
    log.grow(8);
    let Decision::Cosign { state: next, .. } =
        decide(&log.request(5, 13), &log_key, &log.origin, Some(state))
    else {
        panic!("an extension is cosigned");
    };
    assert_eq!(next.size, 13);
    // The log's idea of the old size is not the witness's: 409 with the witness's size.
    assert_eq!(
        decide(&log.request(3, 13), &log_key, &log.origin, Some(state)),
        Decision::Conflict { size: 5 }
    );
    // A rollback (smaller than what was cosigned): the old size does not match either.
    assert_eq!(
        decide(&log.request(0, 3), &log_key, &log.origin, Some(next)),
        Decision::Conflict { size: 13 }
    );
    // A fork: another tree of the same size as the cosigned one, or one extending another.
    let mut fork = Log::new();
    fork.grow(4);
    fork.leaves.push(leaf_hash(b"another fifth"));
    assert_eq!(
        decide(&fork.request(5, 5), &log_key, &log.origin, Some(state)),
        Decision::Inconsistent
    );
    fork.grow(8);
    assert_eq!(
        decide(&fork.request(5, 13), &log_key, &log.origin, Some(state)),
        Decision::Inconsistent
    );
    // A wrong proof.
    let mut wrong = log.request(5, 13);
    wrong.proof[0][0] ^= 1;
    assert_eq!(
        decide(&wrong, &log_key, &log.origin, Some(state)),
        Decision::Inconsistent
    );
    // Signed by another key, or under another origin: unsigned.
    let stranger = key(9).verifying_key();
    assert_eq!(
        decide(&log.request(5, 13), &stranger, &log.origin, Some(state)),
        Decision::Unsigned
    );
    let other_origin = log_origin(&log_key, "g2");
    assert!(matches!(
        decide(&log.request(5, 13), &log_key, &other_origin, Some(state)),
        Decision::Unsigned | Decision::Malformed(_)
    ));
    // old > size.
    let mut backwards = log.request(5, 5);
    backwards.old = 6;
    assert!(matches!(
        decide(&backwards, &log_key, &log.origin, Some(state)),
        Decision::Malformed(_)
    ));
}

#[test]
fn cosigned_checkpoints_open_under_their_policy_only() {
    let mut log = Log::new();
    log.grow(3);
    let authority = log.key.verifying_key();
    let note = sign_checkpoint(&log.key, &log.origin, log.head(3)).expect("sign");
    let body = Note::from_bytes(note.as_bytes())
        .expect("note")
        .text()
        .to_vec();
    let (w1, w2) = (key(11), key(12));
    let keys = [
        WitnessKey::parse(&witness_vkey("witness.example/one", &w1.verifying_key())).expect("vkey"),
        WitnessKey::parse(&witness_vkey("witness.example/two", &w2.verifying_key())).expect("vkey"),
    ];
    let lines = [
        cosign(&w1, "witness.example/one", 1_767_000_000, &body),
        cosign(&w2, "witness.example/two", 1_767_000_001, &body),
    ];
    let both = with_cosignatures(&note, &lines);
    let (head, names) =
        open_witnessed(both.as_bytes(), &authority, &log.origin, &keys, 2).expect("2 of 2");
    assert_eq!(head, log.head(3));
    assert_eq!(names, ["witness.example/one", "witness.example/two"]);
    // One line: 1 of 2 passes a quorum of 1, not of 2.
    let one = with_cosignatures(&note, &lines[..1]);
    assert!(open_witnessed(one.as_bytes(), &authority, &log.origin, &keys, 1).is_ok());
    assert!(open_witnessed(one.as_bytes(), &authority, &log.origin, &keys, 2).is_err());
    // The same line twice counts once.
    let twice = with_cosignatures(&note, &[lines[0].clone(), lines[0].clone()]);
    assert!(open_witnessed(twice.as_bytes(), &authority, &log.origin, &keys, 2).is_err());
    // A cosignature over another checkpoint (another size) refuses the note.
    let other = sign_checkpoint(
        &log.key,
        &log.origin,
        TreeHead {
            size: 2,
            root: mth(&log.leaves[..2]),
        },
    )
    .expect("sign");
    let other_body = Note::from_bytes(other.as_bytes())
        .expect("note")
        .text()
        .to_vec();
    let stale = with_cosignatures(&note, &[cosign(&w1, "witness.example/one", 1, &other_body)]);
    assert!(open_witnessed(stale.as_bytes(), &authority, &log.origin, &keys, 1).is_err());
    // An unknown witness's line is ignored, and does not count.
    let stranger = with_cosignatures(
        &note,
        &[cosign(&key(13), "witness.example/three", 1, &body)],
    );
    assert!(open_witnessed(stranger.as_bytes(), &authority, &log.origin, &keys, 0).is_ok());
    assert!(open_witnessed(stranger.as_bytes(), &authority, &log.origin, &keys, 1).is_err());
}

#[test]
fn witness_keys_parse_strictly() {
    let k = key(11).verifying_key();
    let good = witness_vkey("w.example/one", &k);
    assert_eq!(WitnessKey::parse(&good).expect("parses").key, k);
    let note_key = crate::tlog::verifier_key("w.example/one", &k);
    assert!(
        WitnessKey::parse(&note_key).is_err(),
        "a note key (0x01) is not a cosignature key"
    );
    let renamed = good.replacen("w.example/one", "w.example/two", 1);
    assert!(
        WitnessKey::parse(&renamed).is_err(),
        "the id names the key under its name"
    );
    for bad in [
        "",
        "name",
        "name+00000000",
        "name+00000000+",
        "na me+0+AQ==",
    ] {
        assert!(WitnessKey::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn add_checkpoint_bodies_round_trip_and_refuse_garbage() {
    let mut log = Log::new();
    log.grow(7);
    let request = log.request(3, 7);
    assert_eq!(
        AddCheckpoint::parse(&request.to_body()).expect("parses"),
        request
    );
    for bad in [
        &b"old 3\n"[..],
        b"old\n\nx",
        b"old 03\n\nx",
        b"old -1\n\nx",
        b"old 3\nnot base64!\n\nx",
        b"old 3\nAAAA\n\nx",
        b"new 3\n\nx",
    ] {
        assert!(
            AddCheckpoint::parse(bad).is_err(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    assert!(AddCheckpoint::parse(&vec![b'a'; MAX_REQUEST + 1]).is_err());
}
