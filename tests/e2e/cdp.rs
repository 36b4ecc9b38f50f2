//! A real browser driven through the Chrome DevTools Protocol over a pipe (issue #50: the
//! console's forms must work when a browser submits them, not only when a test posts them).
//!
//! Chromium's `--remote-debugging-pipe` reads protocol messages from descriptor 3 and writes
//! them to descriptor 4, each a JSON object ended by a NUL byte. The browser is started
//! through `sh`, which hands it this process's pipe as descriptors 3 and 4 (so no socket, no
//! WebSocket client and no `unsafe` descriptor juggling here). A reader thread passes the
//! messages on; every wait is bounded, so a browser that hangs fails the test, never stalls it.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long one protocol answer, or one page, may take.
const PATIENCE: Duration = Duration::from_secs(30);

/// A headless Chromium with one page, attached.
pub(crate) struct Browser {
    child: Child,
    to_browser: ChildStdin,
    from_browser: Receiver<Value>,
    next_id: u64,
    session: String,
}

impl Browser {
    /// Starts Chromium (`chromium`: its path) with a fresh profile under `profile`, opens a
    /// blank page and attaches to it.
    pub(crate) fn launch(chromium: &str, profile: &Path) -> Self {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>/dev/null"#)
            .arg(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-pipe",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium starts (scripts/test installs Debian's chromium)");
        let to_browser = child.stdin.take().expect("piped");
        let mut reader = BufReader::new(child.stdout.take().expect("piped"));
        let (sender, from_browser) = channel();
        std::thread::spawn(move || {
            let mut message = Vec::new();
            while reader.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                message.pop_if(|byte| *byte == 0);
                if let Ok(value) = serde_json::from_slice(&message)
                    && sender.send(value).is_err()
                {
                    return;
                }
                message.clear();
            }
        });
        let mut browser = Self {
            child,
            to_browser,
            from_browser,
            next_id: 0,
            session: String::new(),
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let target = target["targetId"].as_str().expect("a target").to_owned();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        );
        browser.session = attached["sessionId"]
            .as_str()
            .expect("a session")
            .to_owned();
        browser.call("Page.enable", json!({}));
        browser
    }

    /// Sends one command (to the page once attached) and waits for its answer.
    fn call(&mut self, method: &str, params: Value) -> Value {
        match self.try_call(method, params) {
            Ok(result) => result,
            Err(answer) => panic!("{method}: {answer}"),
        }
    }

    /// [`Browser::call`], answering the protocol's error instead of failing on it (an
    /// evaluation while a page is being replaced has no context to run in).
    fn try_call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&message).expect("json");
        bytes.push(0);
        self.to_browser
            .write_all(&bytes)
            .and_then(|()| self.to_browser.flush())
            .expect("the browser takes a command");
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from_browser.recv_timeout(left) {
                Ok(answer) if answer["id"] == id => {
                    return match answer.get("error") {
                        Some(_) => Err(answer),
                        None => Ok(answer["result"].clone()),
                    };
                }
                Ok(_event) => {}
                Err(RecvTimeoutError::Timeout) => panic!("{method}: no answer in {PATIENCE:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("{method}: the browser quit"),
            }
        }
    }

    /// The value of `expression` in the page (DevTools' evaluation, which the page's CSP does
    /// not govern; the page's own scripts stay forbidden).
    pub(crate) fn eval(&mut self, expression: &str) -> Value {
        self.try_eval(expression)
            .unwrap_or_else(|| panic!("{expression}: no page to evaluate in"))
    }

    fn try_eval(&mut self, expression: &str) -> Option<Value> {
        let answer = self
            .try_call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true}),
            )
            .ok()?;
        if answer.get("exceptionDetails").is_some() {
            return None;
        }
        Some(answer["result"]["value"].clone())
    }

    /// Opens `url` and waits until it has loaded.
    pub(crate) fn open(&mut self, url: &str) {
        let before = self.location();
        self.call("Page.navigate", json!({"url": url}));
        self.settle(&before);
    }

    /// Clicks the element `selector` finds, as a user would (the browser submits a form with
    /// its own headers), and waits for the page it leads to.
    pub(crate) fn click(&mut self, selector: &str) {
        let before = self.location();
        let found = self.eval(&format!(
            "(() => {{ const e = document.querySelector({selector:?}); if (!e) return false; e.click(); return true; }})()"
        ));
        assert_eq!(found, json!(true), "nothing matches {selector}");
        self.settle(&before);
    }

    /// The page's URL and a load counter that changes with every new document.
    fn location(&mut self) -> (String, String) {
        let url = self
            .eval("location.href")
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // A mark on the current document: a new document does not carry it.
        let mark = format!("m{}", self.next_id);
        self.eval(&format!("window.__weftMark = {mark:?}"));
        (url, mark)
    }

    /// Waits until the document marked `before` was replaced by a complete one.
    fn settle(&mut self, before: &(String, String)) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let state = self
                .try_eval("[document.readyState, window.__weftMark || ''].join(' ')")
                .and_then(|state| state.as_str().map(str::to_owned))
                .unwrap_or_default();
            if state.starts_with("complete") && !state.ends_with(&before.1) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no new page after {} within {PATIENCE:?} ({state})",
                before.0
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The page's text once `ready` holds for it (a page may go on by itself, as the sign-in
    /// answer's meta refresh does); fails with the last text after [`PATIENCE`].
    pub(crate) fn text_when(&mut self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let text = self
                .try_eval("document.readyState === 'complete' && document.body ? document.body.innerText : ''")
                .and_then(|text| text.as_str().map(str::to_owned))
                .unwrap_or_default();
            if ready(&text) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not within {PATIENCE:?}; the page says: {text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The page's URL.
    pub(crate) fn url(&mut self) -> String {
        self.eval("location.href")
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
