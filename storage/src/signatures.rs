//! Signed payloads: the one signature check every signed payload (a session request, a
//! Command, a manifest, Evidence, a Context Package) goes through, and what it answers
//! ([`Signed`]). Its own module because it reads the engine's key cache and authority key
//! as well as the Agents' keys (`access.rs`), which knows no engine.

use weft_api::evidence::AUTHORITY_AGENT;
use weft_api::{ArtifactId, Envelope, ErrorCode, Id, KeyId};
use weft_api::{SignedPayload, Verified};

use crate::access::{agent_by_keyid, key_refusal};
use crate::engine::Engine;
use crate::error::{Error, reject};

/// A payload whose DSSE signature checked out against its signer's registered key, parsed
/// through the one parsing path, and whose claimed producer is that signer.
#[derive(Debug)]
pub(crate) struct Signed<T> {
    /// The registered Agent whose key signed it (or the authority).
    pub(crate) signer: Id,
    /// The key that signed it.
    pub(crate) keyid: KeyId,
    /// `blake3:` of the payload bytes: the id of a manifest or Evidence record.
    pub(crate) payload_id: ArtifactId,
    pub(crate) value: Verified<T>,
}

/// Whether the server's own key may sign this payload (only its reviewer's Evidence).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AuthorityMay {
    Sign,
    NotSign,
}

impl Engine {
    /// The one signature check: resolve `keyid` to a registered Agent (or, where allowed, the
    /// authority), verify the envelope strictly as `T`'s payload type, parse the payload, and
    /// require that the payload's claimed producer and agent card version are the signer's.
    pub(crate) async fn verify_signed<T: SignedPayload>(
        &self,
        envelope: &Envelope,
        authority: AuthorityMay,
    ) -> Result<Signed<T>, Error> {
        self.verify_parsed(envelope, authority, |payload| T::parse_payload(payload))
            .await
    }

    /// [`Self::verify_signed`] for a payload the caller parsed already (a Command's shape is
    /// checked before its signature, DESIGN §10): `parse` answers it for the verified bytes,
    /// which are the bytes it was parsed from, so it is parsed once (issue #44).
    pub(crate) async fn verify_parsed<T: SignedPayload>(
        &self,
        envelope: &Envelope,
        authority: AuthorityMay,
        parse: impl FnOnce(&[u8]) -> Result<T, weft_api::Rejection>,
    ) -> Result<Signed<T>, Error> {
        let keyid = envelope.signer_keyid()?;
        let (authority_keyid, authority_key) = self.authority_key();
        let (signer, key, card_version) =
            if authority == AuthorityMay::Sign && keyid == authority_keyid {
                (
                    Id::parse("agentId", AUTHORITY_AGENT)?,
                    authority_key,
                    "1".to_owned(),
                )
            } else {
                // The generation before the read, as the session cache does (`keys.rs`).
                let generation = *self.auth_generation.borrow();
                match self.keys.get(&keyid, generation) {
                    Some(found) => found,
                    None => {
                        let lookup = keyid.clone();
                        let found = self
                            .db
                            .read(move |conn| match agent_by_keyid(conn, &lookup)? {
                                Some(found) => Ok(found),
                                None => Err(key_refusal(conn, &lookup)?),
                            })
                            .await?;
                        self.keys.put(keyid.clone(), generation, found.clone());
                        found
                    }
                }
            };
        let verified = envelope.verify(T::PAYLOAD_TYPE, &key)?;
        let payload_id = ArtifactId::of(verified.value());
        let value = verified.try_map(|payload| parse(&payload))?;
        let (claimed, claimed_card) = value.value().signer_claim();
        if *claimed != signer {
            return Err(reject(
                ErrorCode::ProducerMismatch,
                format!("signed by {signer}, but the {} names {claimed}", T::NAME),
            ));
        }
        if let Some(claimed_card) = claimed_card
            && claimed_card != card_version
        {
            return Err(reject(
                ErrorCode::ProducerMismatch,
                format!("{signer}'s registered agent card version is {card_version}"),
            ));
        }
        Ok(Signed {
            signer,
            keyid,
            payload_id,
            value,
        })
    }
}
