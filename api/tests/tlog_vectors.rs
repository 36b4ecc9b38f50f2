//! transparency-dev/merkle's RFC 6962/9162 proof probes (`fixtures/vectors/transparency-dev-merkle`,
//! copied with its SOURCE.md) against `weft_api::tlog`'s checks, the ones `weft` and its
//! clients use on inclusion and consistency proofs.
//!
//! Policy on the two probes the Go reference decides by its edge behaviour: a root, leaf or
//! proof hash that is not exactly 32 bytes is refused, always. So
//! `inclusion/single-entry/empty-root-and-leaf.json` is refused (as the probe wants) and
//! `consistency/additional/sizes-are-equal-one-and-proof-is-empty.json`, whose equal "roots"
//! are 12 bytes, is refused too (the probe would accept it): a tree head is a 32-byte hash.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::Value;
use weft_api::tlog::{Proof, TreeHead, check_consistency, check_inclusion};

fn dir(kind: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/vectors/transparency-dev-merkle/testdata")
        .join(kind)
}

fn files(root: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(root).expect("vector directory") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

fn bytes(value: &Value) -> Option<Vec<u8>> {
    value.as_str().map(|text| {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .expect("base64")
    })
}

fn hash32(value: &Value) -> Option<[u8; 32]> {
    bytes(value).and_then(|b| b.try_into().ok())
}

fn proof_hashes(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|h| h.as_str().expect("base64").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn vectors(kind: &str) -> Vec<(PathBuf, Value)> {
    let mut paths = Vec::new();
    files(&dir(kind), &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let v =
                serde_json::from_str(&std::fs::read_to_string(&p).expect("read")).expect("json");
            (p, v)
        })
        .collect()
}

#[test]
fn inclusion_probes() {
    let all = vectors("inclusion");
    assert!(all.len() > 90, "{} inclusion probes", all.len());
    for (path, v) in all {
        let want_err = v["wantErr"].as_bool().expect("wantErr");
        let got = match (hash32(&v["root"]), hash32(&v["leafHash"])) {
            (Some(root), Some(leaf)) => {
                let size = v["treeSize"].as_u64().expect("treeSize");
                let proof = Proof {
                    tree_size: size,
                    leaf_index: Some(v["leafIdx"].as_u64().expect("leafIdx")),
                    hashes: proof_hashes(&v["proof"]),
                };
                check_inclusion(&proof, leaf, TreeHead { size, root })
            }
            _ => Err(weft_api::Rejection::new(
                weft_api::ErrorCode::BadRequest,
                "not 32 bytes",
            )),
        };
        assert_eq!(got.is_err(), want_err, "{}: {got:?}", path.display());
    }
}

#[test]
fn consistency_probes() {
    let all = vectors("consistency");
    assert!(all.len() > 90, "{} consistency probes", all.len());
    for (path, v) in all {
        let mut want_err = v["wantErr"].as_bool().expect("wantErr");
        if path.ends_with("additional/sizes-are-equal-one-and-proof-is-empty.json") {
            want_err = true; // the documented policy above
        }
        let got = match (hash32(&v["root1"]), hash32(&v["root2"])) {
            (Some(root1), Some(root2)) => {
                let (size1, size2) = (
                    v["size1"].as_u64().expect("size1"),
                    v["size2"].as_u64().expect("size2"),
                );
                let proof = Proof {
                    tree_size: size2,
                    leaf_index: None,
                    hashes: proof_hashes(&v["proof"]),
                };
                check_consistency(
                    &proof,
                    TreeHead {
                        size: size1,
                        root: root1,
                    },
                    TreeHead {
                        size: size2,
                        root: root2,
                    },
                )
            }
            _ => Err(weft_api::Rejection::new(
                weft_api::ErrorCode::BadRequest,
                "not 32 bytes",
            )),
        };
        assert_eq!(got.is_err(), want_err, "{}: {got:?}", path.display());
    }
}
