//! Issue #50, names and previews: an artifact's page shows its file name, a download and a
//! preview of text and JSON from verified bytes; the console's download never lets an
//! artifact's bytes run as the console's page (an attachment, `nosniff`, a sandboxing CSP,
//! inline only for raster images), and it answers another Group's artifact as absent.

use axum::body::Body;
use axum::http::{Request, StatusCode};

use super::harness::*;

/// A console request as `agent`, signed in by its session cookie.
fn signed_in(agent: &Agent, uri: &str) -> Request<Body> {
    Request::builder()
        .uri(uri)
        .header("cookie", format!("weft_session={}", agent.token))
        .body(Body::empty())
        .expect("request")
}

/// Publishes `bytes` as `media_type` named `name` in g1; answers its digest.
async fn named(h: &Harness, agent: &Agent, bytes: &[u8], media_type: &str, name: &str) -> String {
    let digests = h.upload(agent, bytes).await;
    let mut manifest = manifest(agent, "g1", digests, &[]);
    manifest.content.media_type = media_type.into();
    manifest.annotations.insert("name".into(), name.into());
    let answer = h.publish(agent, &sign(&agent.key, &manifest)).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    digests.blake3.to_string()
}

backends!(
    async fn the_page_names_previews_and_offers_the_verified_bytes(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let json = br#"{"b":[1,2],"a":"<x>"}"#;
        let id = named(&h, &worker, json, "application/json", "dir/report.json").await;

        let page = h
            .send(signed_in(&worker, &format!("/ui/artifacts/{id}")))
            .await;
        assert_eq!(page.status, StatusCode::OK, "{page:?}");
        let html = String::from_utf8(page.body.to_vec()).expect("html");
        assert!(
            html.contains(r#"<span id="file-name">report.json</span>"#),
            "the last path component of its name: {html}"
        );
        assert!(
            html.contains(&format!(r#"href="/ui/artifacts/{id}/content""#)),
            "{html}"
        );
        let preview = html
            .split(r#"<pre id="preview">"#)
            .nth(1)
            .and_then(|rest| rest.split("</pre>").next())
            .expect("a preview");
        assert!(
            preview.contains("&quot;a&quot;: &quot;&lt;x&gt;&quot;"),
            "pretty, escaped: {preview}"
        );
        assert!(preview.contains('\n'), "pretty-printed: {preview}");

        let download = h
            .send(signed_in(&worker, &format!("/ui/artifacts/{id}/content")))
            .await;
        assert_eq!(download.status, StatusCode::OK, "{download:?}");
        assert_eq!(download.body.as_ref(), json);
        assert_eq!(download.headers["content-type"], "application/octet-stream");
        assert_eq!(
            download.headers["content-disposition"],
            r#"attachment; filename="report.json""#
        );
        assert_eq!(download.headers["x-content-type-options"], "nosniff");
        assert!(
            download.headers["content-security-policy"]
                .to_str()
                .expect("csp")
                .starts_with("sandbox"),
            "{download:?}"
        );

        // Another Group's member, and no session at all, learn nothing.
        let outsider = h.agent("o1", "g2", &["worker"]).await;
        let foreign = h
            .send(signed_in(&outsider, &format!("/ui/artifacts/{id}/content")))
            .await;
        assert_eq!(foreign.status, StatusCode::NOT_FOUND, "{foreign:?}");
        let anonymous = h
            .send(
                Request::builder()
                    .uri(format!("/ui/artifacts/{id}/content"))
                    .body(Body::empty())
                    .expect("request"),
            )
            .await;
        assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "{anonymous:?}");
    }
);

backends!(
    /// HTML and SVG are bytes like any other: never served as a page of this origin, not
    /// even when asked inline; their preview is escaped text.
    async fn an_artifacts_markup_never_runs_in_the_console(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let html = b"<script>alert(document.cookie)</script>";
        let id = named(&h, &worker, html, "text/html", "x\".html").await;
        let svg = named(
            &h,
            &worker,
            b"<svg onload=\"alert(1)\"/>",
            "image/svg+xml",
            "s.svg",
        )
        .await;

        let page = h
            .send(signed_in(&worker, &format!("/ui/artifacts/{id}")))
            .await;
        let page = String::from_utf8(page.body.to_vec()).expect("html");
        assert!(!page.contains("<script>alert"), "{page}");
        assert!(page.contains("&lt;script&gt;alert"), "{page}");
        for artifact in [&id, &svg] {
            let inline = h
                .send(signed_in(
                    &worker,
                    &format!("/ui/artifacts/{artifact}/content?inline=1"),
                ))
                .await;
            assert_eq!(inline.status, StatusCode::OK, "{inline:?}");
            assert_eq!(inline.headers["content-type"], "application/octet-stream");
            let disposition = inline.headers["content-disposition"]
                .to_str()
                .expect("header");
            assert!(disposition.starts_with("attachment;"), "{disposition}");
            assert!(
                !disposition.contains("x\""),
                "a quote in the name cannot end the header's value: {disposition}"
            );
        }
        let svg_page = h
            .send(signed_in(&worker, &format!("/ui/artifacts/{svg}")))
            .await;
        let svg_page = String::from_utf8(svg_page.body.to_vec()).expect("html");
        assert!(
            !svg_page.contains("<img"),
            "an SVG is not shown inline: {svg_page}"
        );

        // A raster image is shown in the page, with its own type.
        let png = named(&h, &worker, b"\x89PNG\r\n\x1a\n", "image/png", "p.png").await;
        let png_page = h
            .send(signed_in(&worker, &format!("/ui/artifacts/{png}")))
            .await;
        let png_page = String::from_utf8(png_page.body.to_vec()).expect("html");
        assert!(
            png_page.contains(&format!(r#"src="/ui/artifacts/{png}/content?inline=1""#)),
            "{png_page}"
        );
        let shown = h
            .send(signed_in(
                &worker,
                &format!("/ui/artifacts/{png}/content?inline=1"),
            ))
            .await;
        assert_eq!(shown.headers["content-type"], "image/png");
        assert!(
            shown.headers["content-disposition"]
                .to_str()
                .expect("header")
                .starts_with("inline;")
        );
    }
);

backends!(
    /// Issue #50, search by name: `GET /v1/artifacts?name=` finds the artifacts whose file
    /// name starts with it, in the caller's Group only; the console's search falls back to it.
    async fn artifacts_are_found_by_their_file_name(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let report = named(&h, &worker, b"{}", "application/json", "out/report-q3.json").await;
        named(&h, &worker, b"x", "text/plain", "notes.txt").await;
        let other = h.agent("o1", "g2", &["worker"]).await;
        let digests = h.upload(&other, b"theirs").await;
        let mut theirs = manifest(&other, "g2", digests, &[]);
        theirs
            .annotations
            .insert("name".into(), "report-secret.json".into());
        let answer = h.publish(&other, &sign(&other.key, &theirs)).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");

        let found = h.get_json(&worker, "/v1/artifacts?name=report").await;
        let items = found["items"].as_array().expect("items");
        assert_eq!(items.len(), 1, "g1's only, by prefix: {found}");
        assert_eq!(items[0]["artifact"], report.as_str());
        assert_eq!(items[0]["name"], "report-q3.json");
        let none = h.get_json(&worker, "/v1/artifacts?name=q3").await;
        assert_eq!(
            none["items"],
            serde_json::json!([]),
            "a prefix, not a substring"
        );

        let page = h.send(signed_in(&worker, "/ui/search?q=report")).await;
        assert_eq!(page.status, StatusCode::OK, "{page:?}");
        let html = String::from_utf8(page.body.to_vec()).expect("html");
        let table = html
            .split(r#"<table id="named">"#)
            .nth(1)
            .and_then(|rest| rest.split("</table>").next())
            .expect("the named artifacts");
        assert!(
            table.contains(&format!("/ui/artifacts/{report}")),
            "{table}"
        );
        assert!(!table.contains("report-secret"), "{table}");
    }
);
