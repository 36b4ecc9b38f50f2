//! External conformance vectors (copied from `../shared/vectors` into `fixtures/vectors`, each
//! with its SOURCE.md): BLAKE3 official, NIST CAVP SHA-256 (short, long, Monte), Wycheproof
//! Ed25519, and CCTV Ed25519 edge cases pinned against weft's signature policy.

use std::path::PathBuf;

use base64::Engine as _;
use ed25519_dalek::VerifyingKey;
use serde_json::Value;
use sha2::Digest as _;
use weft_api::digest::Hasher;
use weft_api::dsse::{BASE64, parse_public_key, verify_detached};

fn fixture(path: &str) -> String {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/vectors")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn unhex(text: &str) -> Vec<u8> {
    hex::decode(text).unwrap_or_else(|e| panic!("bad hex {text:?}: {e}"))
}

#[test]
fn blake3_official_vectors() {
    let vectors: Value = serde_json::from_str(&fixture("blake3/test_vectors.json")).expect("json");
    let key = vectors["key"]
        .as_str()
        .expect("key")
        .as_bytes()
        .try_into()
        .expect("32-byte key");
    let context = vectors["context_string"].as_str().expect("context");
    let cases = vectors["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 35);
    for case in cases {
        let len = case["input_len"].as_u64().expect("len") as usize;
        let input: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let expected = unhex(case["hash"].as_str().expect("hash"));
        // Our digest type (what the server stores and checks) is the first 32 bytes.
        assert_eq!(
            Hasher::digest(&input).blake3.0[..],
            expected[..32],
            "hash, len {len}"
        );
        let mut xof = vec![0u8; expected.len()];
        blake3::Hasher::new()
            .update(&input)
            .finalize_xof()
            .fill(&mut xof);
        assert_eq!(xof, expected, "xof, len {len}");
        let keyed = unhex(case["keyed_hash"].as_str().expect("keyed"));
        assert_eq!(
            blake3::keyed_hash(key, &input).as_bytes()[..],
            keyed[..32],
            "keyed, len {len}"
        );
        let derived = unhex(case["derive_key"].as_str().expect("derive"));
        assert_eq!(
            blake3::derive_key(context, &input)[..],
            derived[..32],
            "derive_key, len {len}"
        );
    }
}

/// `(Msg, MD)` pairs of a CAVP `.rsp` file, honouring `Len` (bits) for the empty message.
fn cavp_pairs(text: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut pairs = Vec::new();
    let mut len_bits = 0usize;
    let mut message = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(value) = line.strip_prefix("Len = ") {
            len_bits = value.parse().expect("Len");
        } else if let Some(value) = line.strip_prefix("Msg = ") {
            message = unhex(value);
            message.truncate(len_bits / 8);
        } else if let Some(value) = line.strip_prefix("MD = ") {
            pairs.push((std::mem::take(&mut message), unhex(value)));
        }
    }
    pairs
}

#[test]
fn nist_sha256_short_and_long_messages() {
    for (file, expected_count) in [
        ("nist-sha256/SHA256ShortMsg.rsp", 65),
        ("nist-sha256/SHA256LongMsg.rsp", 64),
    ] {
        let pairs = cavp_pairs(&fixture(file));
        assert_eq!(pairs.len(), expected_count, "{file}");
        for (message, digest) in pairs {
            assert_eq!(
                Hasher::digest(&message).sha256.0.to_vec(),
                digest,
                "{file}, {} bytes",
                message.len()
            );
        }
    }
}

#[test]
fn nist_sha256_monte_carlo() {
    let text = fixture("nist-sha256/SHA256Monte.rsp");
    let seed_line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Seed = "))
        .expect("seed");
    let mut seed = unhex(seed_line);
    let expected: Vec<Vec<u8>> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("MD = "))
        .map(unhex)
        .collect();
    assert_eq!(expected.len(), 100);
    for (round, digest) in expected.iter().enumerate() {
        let mut md = [seed.clone(), seed.clone(), seed.clone()];
        for _ in 3..1003 {
            let next = sha2::Sha256::digest([md[0].as_slice(), &md[1], &md[2]].concat()).to_vec();
            md = [md[1].clone(), md[2].clone(), next];
        }
        seed = md[2].clone();
        assert_eq!(&seed, digest, "Monte round {round}");
    }
}

#[test]
fn wycheproof_ed25519_all_151_cases_match() {
    let vectors: Value =
        serde_json::from_str(&fixture("wycheproof-ed25519/ed25519_test.json")).expect("json");
    let mut n_cases = 0;
    for group in vectors["testGroups"].as_array().expect("groups") {
        let key_bytes: [u8; 32] = unhex(group["publicKey"]["pk"].as_str().expect("pk"))
            .try_into()
            .expect("32 bytes");
        // The key as an agent would register it: base64, through weft's key parser.
        let key =
            parse_public_key(&BASE64.encode(key_bytes)).expect("wycheproof keys are valid points");
        for test in group["tests"].as_array().expect("tests") {
            n_cases += 1;
            let message = unhex(test["msg"].as_str().expect("msg"));
            let signature = unhex(test["sig"].as_str().expect("sig"));
            let accepted = verify_detached(&key, &message, &signature).is_ok();
            let expected = test["result"].as_str() == Some("valid");
            assert_eq!(
                accepted, expected,
                "tcId {} ({})",
                test["tcId"], test["comment"]
            );
        }
    }
    assert_eq!(n_cases, 151);
}

#[test]
fn cctv_ed25519_edge_cases_pin_the_policy() {
    let vectors: Value =
        serde_json::from_str(&fixture("cctv-ed25519/ed25519vectors.json")).expect("json");
    let cases = vectors.as_array().expect("array");
    assert_eq!(cases.len(), 914);
    let mut n_strict = 0;
    let mut n_policy = 0;
    for case in cases {
        let key_bytes: [u8; 32] = unhex(case["key"].as_str().expect("key"))
            .try_into()
            .expect("32 bytes");
        let signature = unhex(case["sig"].as_str().expect("sig"));
        let message = case["msg"].as_str().expect("msg").as_bytes();
        let flags: Vec<&str> = case["flags"]
            .as_array()
            .map(|f| f.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let Ok(key) = VerifyingKey::from_bytes(&key_bytes) else {
            continue;
        };
        if verify_detached(&key, message, &signature).is_ok() {
            n_strict += 1;
            assert!(
                !flags
                    .iter()
                    .any(|f| f.starts_with("non_canonical") || *f == "low_order_residue"),
                "vector {} accepted despite {flags:?}",
                case["number"]
            );
        }
        // The full policy also refuses small-order keys at registration.
        if parse_public_key(&BASE64.encode(key_bytes)).is_ok()
            && verify_detached(&key, message, &signature).is_ok()
        {
            n_policy += 1;
        }
    }
    // Pinned: a dependency upgrade that changes either number must be a deliberate decision.
    assert_eq!(n_strict, 43, "verify_strict acceptances");
    // Refusing small-order keys at registration removes none of those 43: every accepted
    // vector has a mixed-order key (flag low_order_component_A) or no flag at all.
    assert_eq!(
        n_policy, 43,
        "acceptances with weak keys refused at registration"
    );
}
