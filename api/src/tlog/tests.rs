//! `weft_api::tlog`: checkpoints open only with their key and origin, tile paths have one
//! spelling, entry bundles cap a leaf at 65,535 bytes, proofs keep their API shape and
//! verify against an RFC 6962 tree written here from the RFC.

use super::*;

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn head(size: u64, fill: u8) -> TreeHead {
    TreeHead {
        size,
        root: [fill; 32],
    }
}

#[test]
fn a_checkpoint_opens_with_its_authority_key_under_its_origin_only() {
    let authority = key(1);
    let origin = origin(&authority.verifying_key(), "g1");
    assert!(origin.starts_with("weft/") && origin.ends_with("/g1"));
    let note = sign_checkpoint(&authority, &origin, head(7, 9)).expect("signs");
    // The C2SP body: origin, size, base64 root; a blank line; one signature line.
    let mut lines = note.lines();
    assert_eq!(lines.next(), Some(origin.as_str()));
    assert_eq!(lines.next(), Some("7"));
    assert_eq!(
        lines.next(),
        Some(
            base64::engine::general_purpose::STANDARD
                .encode([9u8; 32])
                .as_str()
        )
    );
    assert_eq!(lines.next(), Some(""));
    assert!(
        lines
            .next()
            .is_some_and(|l| l.starts_with(&format!("— {origin} ")))
    );
    // Deterministic: the same head gives the same bytes.
    assert_eq!(
        note,
        sign_checkpoint(&authority, &origin, head(7, 9)).expect("signs")
    );
    assert_eq!(
        open_checkpoint(note.as_bytes(), &authority.verifying_key(), &origin),
        Ok(head(7, 9))
    );
    // Another key, another origin, one changed byte: refused.
    assert!(open_checkpoint(note.as_bytes(), &key(2).verifying_key(), &origin).is_err());
    let other = super::origin(&authority.verifying_key(), "g2");
    assert!(open_checkpoint(note.as_bytes(), &authority.verifying_key(), &other).is_err());
    let tampered = note.replacen("\n7\n", "\n8\n", 1);
    assert!(open_checkpoint(tampered.as_bytes(), &authority.verifying_key(), &origin).is_err());
}

#[test]
fn the_verifier_key_names_the_note_key_id() {
    let authority = key(3).verifying_key();
    let text = verifier_key("weft/abc/g1", &authority);
    let parts: Vec<&str> = text.split('+').collect();
    assert_eq!(parts[0], "weft/abc/g1");
    assert_eq!(
        parts[1],
        format!("{:08x}", note_key_id("weft/abc/g1", &authority))
    );
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(parts[2])
        .expect("base64");
    assert_eq!(bytes[0], 0x01);
    assert_eq!(&bytes[1..], authority.as_bytes());
    assert_eq!(
        parse_verifier_key(&text).expect("parses"),
        ("weft/abc/g1".to_owned(), authority)
    );
    assert!(parse_verifier_key(&text.replacen("g1", "g2", 1)).is_err());
    assert!(
        parse_verifier_key(&crate::tlog::witness::witness_vkey(
            "weft/abc/g1",
            &authority
        ))
        .is_err()
    );
}

#[test]
fn tile_paths_are_c2sp_and_nothing_else() {
    for (path, level, index, width, data) in [
        ("tile/0/000", 0, 0, 256, false),
        ("tile/0/x001/234", 0, 1234, 256, false),
        ("tile/2/001.p/7", 2, 1, 7, false),
        ("tile/entries/x001/x234/067.p/255", 0, 1_234_067, 255, true),
    ] {
        let tile = tile_of_path(path).unwrap_or_else(|| panic!("{path} parses"));
        assert_eq!(
            (
                tile.level(),
                tile.level_index(),
                tile.width(),
                tile.is_data()
            ),
            (level, index, width, data),
            "{path}"
        );
        assert_eq!(path_of_tile(&tile), path);
    }
    for bad in [
        "tile/0/1",
        "tile/0/0001",
        "tile/00/000",
        "tile/0/000.p/0",
        "tile/0/000.p/256",
        "tile/0/x000/001",
        "tile/8/0/000",
        "tile/data/000",
        "tile/entries/000/",
        "tile/0/-01",
        "tile//000",
        "tiles/0/000",
        "tile/0/000.p/01",
    ] {
        assert!(tile_of_path(bad).is_none(), "{bad} is refused");
    }
}

#[test]
fn an_entry_bundle_holds_leaves_up_to_65535_bytes() {
    let mut bundle = Vec::new();
    assert_eq!(push_entry(&mut bundle, b"abc"), Some(()));
    assert_eq!(bundle, [0, 3, b'a', b'b', b'c']);
    assert_eq!(push_entry(&mut bundle, &vec![0; MAX_ENTRY]), Some(()));
    assert_eq!(push_entry(&mut bundle, &vec![0; MAX_ENTRY + 1]), None);
}

#[test]
fn proofs_keep_their_api_shape() {
    let proof = Proof::new(5, Some(2), &[[0; 32]]);
    let json = serde_json::to_value(&proof).expect("json");
    assert_eq!(
        json,
        serde_json::json!({"treeSize": 5, "leafIndex": 2, "hashes": ["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]})
    );
    let consistency = serde_json::to_value(Proof::new(5, None, &[])).expect("json");
    assert_eq!(
        consistency,
        serde_json::json!({"treeSize": 5, "hashes": []})
    );
    assert!(
        serde_json::from_value::<Proof>(serde_json::json!({"treeSize": 1, "hashes": [], "x": 1}))
            .is_err()
    );
}

/// A small RFC 6962 tree written from the RFC, to check `tlog_tiles` proofs against.
fn mth(leaves: &[[u8; 32]]) -> [u8; 32] {
    use sha2::Digest as _;
    match leaves.len() {
        0 => sha2::Sha256::digest([]).into(),
        1 => leaves[0],
        n => {
            let k = n.next_power_of_two() / 2;
            let mut hasher = sha2::Sha256::new();
            hasher.update([1u8]);
            hasher.update(mth(&leaves[..k]));
            hasher.update(mth(&leaves[k..]));
            hasher.finalize().into()
        }
    }
}

#[test]
fn a_frontier_gives_the_rfc_root_at_every_size() {
    let mut frontier = Frontier::default();
    let mut leaves = Vec::new();
    assert_eq!(frontier.root(), mth(&leaves));
    for i in 0u32..300 {
        let leaf = leaf_hash(&i.to_be_bytes());
        leaves.push(leaf);
        frontier.push(leaf);
        assert_eq!(frontier.size(), leaves.len() as u64);
        assert_eq!(frontier.root(), mth(&leaves), "size {}", leaves.len());
    }
}

#[test]
fn inclusion_and_consistency_checks_refuse_every_wrong_input() {
    let leaves: Vec<[u8; 32]> = (0u8..13).map(|i| leaf_hash(&[i])).collect();
    let root = |n: usize| TreeHead {
        size: n as u64,
        root: mth(&leaves[..n]),
    };
    // A proof from the textbook construction (RFC 9162 §2.1.3.1), recursively.
    fn path(m: usize, leaves: &[[u8; 32]]) -> Vec<[u8; 32]> {
        let n = leaves.len();
        if n <= 1 {
            return Vec::new();
        }
        let k = n.next_power_of_two() / 2;
        if m < k {
            let mut p = path(m, &leaves[..k]);
            p.push(mth(&leaves[k..]));
            p
        } else {
            let mut p = path(m - k, &leaves[k..]);
            p.push(mth(&leaves[..k]));
            p
        }
    }
    for n in 1..=13usize {
        for m in 0..n {
            let proof = Proof::new(n as u64, Some(m as u64), &path(m, &leaves[..n]));
            assert_eq!(
                check_inclusion(&proof, leaves[m], root(n)),
                Ok(()),
                "{m} in {n}"
            );
            let other = if m == 0 { 1 } else { 0 };
            if n > 1 {
                assert!(check_inclusion(&proof, leaves[other], root(n)).is_err());
            }
            let mut wrong_index = proof.clone();
            wrong_index.leaf_index = Some((m as u64 + 1) % n as u64);
            if n > 1 {
                assert!(check_inclusion(&wrong_index, leaves[m], root(n)).is_err());
            }
        }
    }
    assert_eq!(
        check_consistency(&Proof::new(4, None, &[]), head(0, 0), root(4)),
        Ok(())
    );
    assert!(check_consistency(&Proof::new(4, None, &[]), root(5), root(4)).is_err());
}

proptest::proptest! {
    #[test]
    fn no_path_panics_and_every_tile_has_one_spelling(path in "tile/(entries|[0-9]{1,3})/(x[0-9]{3}/){0,3}[0-9]{1,4}(\\.p/[0-9]{1,4})?") {
        if let Some(tile) = tile_of_path(&path) {
            proptest::prop_assert_eq!(path_of_tile(&tile), path);
        }
    }

    #[test]
    fn no_text_panics(path in "\\PC{0,60}") {
        let _ = tile_of_path(&path);
    }
}
