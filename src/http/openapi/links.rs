//! The OpenAPI `links` of the document (issue #40): where a success answer carries an id that
//! another operation takes, the answer says so, so that clients and Schemathesis's stateful
//! phase can follow it (a fuzzer that only guesses ids meets nothing but 404).
//!
//! Each link names its target by `operationRef` (a JSON pointer into this document), which
//! stays right when an `operationId` is renamed; `openapi_check` holds every target and
//! expression to an operation and a field that exist.

use serde_json::{Map, Value, json};

/// One link: from a source operation's success answer to a target operation, with the
/// target's parameters as runtime expressions.
pub(super) struct Link {
    pub(super) source: (&'static str, &'static str),
    pub(super) name: &'static str,
    pub(super) target: (&'static str, &'static str),
    pub(super) parameters: &'static [(&'static str, &'static str)],
}

const ARTIFACT: &[(&str, &str)] = &[("digest", "$response.body#/artifact")];
const UPLOAD: &[(&str, &str)] = &[("upload_id", "$response.body#/uploadId")];

/// Every link the document declares.
pub(super) const LINKS: &[Link] = &[
    // A publication answers the artifact it published.
    Link {
        source: ("post", "/v1/artifacts"),
        name: "ShowArtifact",
        target: ("get", "/v1/artifacts/{digest}"),
        parameters: ARTIFACT,
    },
    Link {
        source: ("post", "/v1/artifacts"),
        name: "ArtifactContent",
        target: ("get", "/v1/artifacts/{digest}/content"),
        parameters: ARTIFACT,
    },
    Link {
        source: ("post", "/v1/artifacts"),
        name: "ArtifactProvenance",
        target: ("get", "/v1/artifacts/{digest}/provenance"),
        parameters: ARTIFACT,
    },
    Link {
        source: ("post", "/v1/artifacts"),
        name: "ArtifactEvidence",
        target: ("get", "/v1/artifacts/{digest}/evidence"),
        parameters: ARTIFACT,
    },
    Link {
        source: ("put", "/v1/artifacts/{digest}"),
        name: "ShowArtifact",
        target: ("get", "/v1/artifacts/{digest}"),
        parameters: ARTIFACT,
    },
    Link {
        source: ("put", "/v1/artifacts/{digest}"),
        name: "ArtifactContent",
        target: ("get", "/v1/artifacts/{digest}/content"),
        parameters: ARTIFACT,
    },
    // Evidence answers its id.
    Link {
        source: ("post", "/v1/evidence"),
        name: "ShowEvidence",
        target: ("get", "/v1/evidence/{evidence_id}"),
        parameters: &[("evidence_id", "$response.body#/evidenceId")],
    },
    // Issue #46: a policy answers its Group; a hold its id.
    Link {
        source: ("put", "/v1/admin/groups/{group_id}/retention"),
        name: "ShowRetention",
        target: ("get", "/v1/admin/groups/{group_id}/retention"),
        parameters: &[("group_id", "$response.body#/groupId")],
    },
    Link {
        source: ("put", "/v1/admin/groups/{group_id}/retention"),
        name: "GroupUsage",
        target: ("get", "/v1/admin/groups/{group_id}/usage"),
        parameters: &[("group_id", "$response.body#/groupId")],
    },
    Link {
        source: ("post", "/v1/admin/holds"),
        name: "LiftHold",
        target: ("delete", "/v1/admin/holds/{hold_id}"),
        parameters: &[("hold_id", "$response.body#/holdId")],
    },
    Link {
        source: ("post", "/v1/groups/{group_id}/holds"),
        name: "LiftGroupHold",
        target: ("delete", "/v1/groups/{group_id}/holds/{hold_id}"),
        parameters: &[
            ("group_id", "$request.path.group_id"),
            ("hold_id", "$response.body#/holdId"),
        ],
    },
    // A Command answers its aggregate's view: a WorkItem's, or a Mission's.
    Link {
        source: ("post", "/v1/groups/{group_id}/commands"),
        name: "ShowWorkItem",
        target: ("get", "/v1/workitems/{work_item_id}"),
        parameters: &[("work_item_id", "$response.body#/state/workItemId")],
    },
    Link {
        source: ("post", "/v1/groups/{group_id}/commands"),
        name: "ShowMission",
        target: ("get", "/v1/missions/{mission_id}"),
        parameters: &[("mission_id", "$response.body#/state/missionId")],
    },
    // A resumable upload answers its id; the chunks, the offset and the finish take it.
    Link {
        source: ("post", "/v1/uploads"),
        name: "UploadChunk",
        target: ("patch", "/v1/uploads/{upload_id}"),
        parameters: UPLOAD,
    },
    Link {
        source: ("post", "/v1/uploads"),
        name: "UploadOffset",
        target: ("head", "/v1/uploads/{upload_id}"),
        parameters: UPLOAD,
    },
    Link {
        source: ("post", "/v1/uploads"),
        name: "UploadFinish",
        target: ("put", "/v1/uploads/{upload_id}"),
        parameters: UPLOAD,
    },
    Link {
        source: ("post", "/v1/uploads"),
        name: "UploadCancel",
        target: ("delete", "/v1/uploads/{upload_id}"),
        parameters: UPLOAD,
    },
    Link {
        source: ("post", "/v1/blobs"),
        name: "BlobHead",
        target: ("head", "/v1/blobs/{digest}"),
        parameters: &[("digest", "$response.body#/blake3")],
    },
    Link {
        source: ("post", "/v1/leases/{lease_id}/tokens"),
        name: "RevokeToken",
        target: ("delete", "/v1/leases/{lease_id}/tokens/{token_id}"),
        parameters: &[
            ("lease_id", "$request.path.lease_id"),
            ("token_id", "$response.body#/tokenId"),
        ],
    },
    Link {
        source: ("post", "/v1/groups/{group_id}/context"),
        name: "ShowContext",
        target: ("get", "/v1/context/{package_id}"),
        parameters: &[("package_id", "$response.body#/packageId")],
    },
    Link {
        source: ("post", "/v1/groups/{group_id}/context"),
        name: "ContextVersion",
        target: ("get", "/v1/context/{package_id}/versions/{version}"),
        parameters: &[
            ("package_id", "$response.body#/packageId"),
            ("version", "$response.body#/version"),
        ],
    },
];

/// A JSON pointer to the operation `(method, path)` of this document.
pub(super) fn operation_ref((method, path): (&str, &str)) -> String {
    let escaped = path.replace('~', "~0").replace('/', "~1");
    format!("#/paths/{escaped}/{method}")
}

/// The links of a success answer of `(method, path)`.
pub(super) fn links(method: &str, path: &str) -> Map<String, Value> {
    LINKS
        .iter()
        .filter(|link| link.source == (method, path))
        .map(|link| {
            let parameters: Map<String, Value> = link
                .parameters
                .iter()
                .map(|(name, expression)| ((*name).to_owned(), json!(expression)))
                .collect();
            (
                link.name.to_owned(),
                json!({"operationRef": operation_ref(link.target), "parameters": parameters}),
            )
        })
        .collect()
}
