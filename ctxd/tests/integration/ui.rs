//! The web page (`GET /ui`) in a real browser: Debian's `chromium`, headless, driven over
//! WebDriver by `chromedriver` (Debian's `chromium-driver`; `scripts/test.sh` installs both) —
//! plain HTTP and JSON, so the harness's blocking client is the whole driver.
//!
//! Against a daemon behind a token on the demo project: the page shows the sign-in and no
//! index data without the token (and after a wrong one); with it, the status page, a search and
//! a locate, a click on a result and on a graph node, the impact of a change, a session's
//! answers, and the status page following an edit to a new version; no console error on the
//! way (the 401s of the sign-in requests are the browser's network log, not the page's). With
//! `CTXD_UI_SCREENSHOTS=DIR` the four pages (and an impact) are saved as PNGs there (docs/web-page.md's pictures).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

use crate::support::*;

const TOKEN: &str = "ui-test-token-0123456789";
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A headless chromium behind chromedriver, one WebDriver session.
pub(crate) struct Browser {
    driver: Child,
    url: String,
    client: reqwest::blocking::Client,
}

fn find_program(env: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    names.iter().flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n))).find(|p| p.is_file())
}

impl Browser {
    /// `None` (saying why) where chromium or chromedriver is missing.
    pub(crate) fn start() -> Option<Self> {
        let chromium = find_program("CTXD_TEST_CHROMIUM", &["chromium", "chromium-browser", "google-chrome"]);
        let driver = find_program("CTXD_TEST_CHROMEDRIVER", &["chromedriver"]);
        let (Some(chromium), Some(driver)) = (chromium, driver) else {
            eprintln!(
                "skipped: the web page's browser test needs chromium and chromedriver (Debian: apt-get install \
                 chromium chromium-driver; scripts/test.sh installs them)"
            );
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(&driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver");
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
        let base = format!("http://127.0.0.1:{port}");
        wait_for("chromedriver", Duration::from_secs(30), || {
            client.get(format!("{base}/status")).send().is_ok_and(|r| r.status().is_success())
        });
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {"binary": chromium, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1200,860", "--hide-scrollbars", "--no-first-run"]}}}});
        let created: Value = client.post(format!("{base}/session")).json(&caps).send().unwrap().json().unwrap();
        let id = created["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {created}"));
        Some(Self { driver: child, url: format!("{base}/session/{id}"), client })
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.url);
        let req = match method {
            "GET" => self.client.get(url),
            _ => self.client.post(url).json(&body.unwrap_or(json!({}))),
        };
        let v: Value = req.send().unwrap().json().unwrap();
        assert!(v["value"].get("error").is_none(), "WebDriver {path}: {v}");
        v["value"].clone()
    }

    pub(crate) fn go(&self, url: &str) {
        self.call("POST", "/url", Some(json!({ "url": url })));
    }

    pub(crate) fn js(&self, script: &str) -> Value {
        self.call("POST", "/execute/sync", Some(json!({"script": script, "args": []})))
    }

    fn element(&self, css: &str) -> String {
        let v = self.call("POST", "/element", Some(json!({"using": "css selector", "value": css})));
        v[ELEMENT].as_str().unwrap().to_string()
    }

    pub(crate) fn click(&self, css: &str) {
        let e = self.element(css);
        self.call("POST", &format!("/element/{e}/click"), None);
    }

    pub(crate) fn type_into(&self, css: &str, text: &str) {
        let e = self.element(css);
        self.call("POST", &format!("/element/{e}/clear"), None);
        self.call("POST", &format!("/element/{e}/value"), Some(json!({ "text": text })));
    }

    pub(crate) fn text(&self, css: &str) -> String {
        let e = self.element(css);
        self.call("GET", &format!("/element/{e}/text"), None).as_str().unwrap_or_default().to_string()
    }

    /// Waits until `script` (a JS expression) is truthy.
    pub(crate) fn wait(&self, what: &str, script: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.js(&format!("return !!({script});")).as_bool().unwrap_or(false) {
            let error = self.js("return document.getElementById('error').textContent;");
            assert!(Instant::now() < deadline, "the page did not show {what}; its error line: {error}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn screenshot(&self, dir: Option<&Path>, name: &str) {
        let Some(dir) = dir else { return };
        let b64 = self.call("GET", "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD.decode(b64.as_str().unwrap()).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }

    /// The browser's console entries of level SEVERE since the last call, less the network
    /// log's lines for the 401s that the sign-in is about.
    pub(crate) fn console_errors(&self) -> Vec<String> {
        let url = format!("{}/se/log", self.url);
        let v: Value = self.client.post(url).json(&json!({"type": "browser"})).send().unwrap().json().unwrap();
        let entries = v["value"].as_array().cloned().unwrap_or_default();
        entries
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .filter(|m| !m.contains("status of 401"))
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.client.delete(&self.url).send();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

#[test]
fn the_web_page_in_a_real_browser_signs_in_asks_draws_the_graph_and_follows_edits() {
    require_model();
    let Some(browser) = Browser::start() else { return };
    let shots = std::env::var_os("CTXD_UI_SCREENSHOTS").map(PathBuf::from);
    let (_tmp, root, daemon) = serve_demo_with_token(TOKEN);
    let ui = format!("{}/ui", daemon.base);

    // The page itself holds nothing; without the token it asks for one and shows no data.
    let page = daemon.get("/ui").text().unwrap();
    assert!(page.contains("Sign in") && !page.contains("auth.rs"), "{page}");
    browser.go(&ui);
    browser.wait("the sign-in", "!document.getElementById('signin').hidden");
    let body = browser.text("body");
    assert!(!body.contains("auth.rs") && !body.contains("cache.py") && !body.contains("version "), "{body}");
    browser.type_into("#token", "a-wrong-token");
    browser.click("#signin-form button");
    browser.wait("the sign-in again", "document.getElementById('signin-error').textContent.includes('not accepted')");
    assert!(browser.js("return document.getElementById('status-cards').children.length").as_u64() == Some(0));

    // Status, with the token.
    browser.type_into("#token", TOKEN);
    browser.click("#signin-form button");
    browser.wait("the status cards", "document.querySelectorAll('#status-cards .card').length >= 5");
    browser.wait("the versions", "document.querySelectorAll('#status-versions .version').length >= 1");
    let cards = browser.text("#status-cards");
    assert!(
        cards.contains("writer")
            && cards.contains("ctxd-writer.lock (held by this process")
            && cards.contains("all-MiniLM-L6-v2"),
        "{cards}"
    );
    browser.wait("pipeline figures", "document.querySelector('#status-pipeline table')");
    let version: u64 = browser.text("#stamp").trim_start_matches("version ").parse().unwrap();
    let paint = browser.js("const p = performance.getEntriesByName('first-contentful-paint')[0]; \
         const n = performance.getEntriesByType('navigation')[0]; \
         return {fcp_ms: p ? p.startTime : null, transfer_bytes: n ? n.transferSize : null};");
    eprintln!("ui: first contentful paint of /ui on loopback: {paint}");
    browser.screenshot(shots.as_deref(), "status");

    // Ask: a search, a click on its first result, the curl line.
    browser.go(&format!("{ui}#ask"));
    browser.type_into("#ask-text", "verify a password against its stored hash");
    browser.click("#ask-go");
    browser.wait("search results", "document.querySelectorAll('#ask-results .result').length > 0");
    let first = browser.text("#ask-results .result .head");
    assert!(first.contains("src/auth.rs"), "{first}");
    assert_eq!(browser.js("return document.querySelectorAll('#ask-results .ln.hit').length > 0"), json!(true));
    browser.click("#ask-results .result .head");
    assert_eq!(
        browser.js("return document.querySelector('#ask-results .result').classList.contains('open')"),
        json!(false)
    );
    browser.click("#ask-results .result .head");
    let curl = browser.js("return document.getElementById('ask-curl').textContent");
    assert!(curl.as_str().unwrap().contains("/v1/search") && !curl.as_str().unwrap().contains(TOKEN), "{curl}");
    browser.screenshot(shots.as_deref(), "ask");
    // A locate: the located files with their why.
    browser.js("document.getElementById('ask-kind').value = 'locate';");
    browser.type_into("#ask-text", "login fails: verify_password rejects a correct password after register");
    browser.click("#ask-go");
    browser.wait("located files", "document.querySelector('#ask-results .why')");
    assert!(browser.text("#ask-results .result .head").contains("src/auth.rs"));

    // Graph: a symbol's neighbourhood, a node clicked open.
    browser.go(&format!("{ui}#graph?target=verify_password"));
    browser.wait("the graph", "document.querySelectorAll('#graph-svg .node').length >= 2");
    let before = browser.js("return document.querySelectorAll('#graph-svg .node').length").as_u64().unwrap();
    let names = browser.js("return [...document.querySelectorAll('#graph-svg .node')].map(n => n.dataset.id)");
    assert!(names.to_string().contains("hash_password"), "{names}");
    browser.click("#graph-svg .node[data-id='hash_password'] circle");
    browser.wait(
        "the clicked node expanded",
        "document.querySelector(\"#graph-svg .node[data-id='hash_password'] circle\").getAttribute('r') === '9'",
    );
    let after = browser.js("return document.querySelectorAll('#graph-svg .node').length").as_u64().unwrap();
    assert!(after >= before, "{before} → {after}");
    browser.js("window.scrollTo(0, 0);");
    browser.screenshot(shots.as_deref(), "graph");
    browser.type_into("#impact-diff", "src/auth.rs");
    browser.click("#impact-go");
    browser.wait("the impact", "document.querySelectorAll('#impact-svg .node').length >= 2");
    let impact = browser.text("#impact-svg");
    assert!(impact.contains("verify_password") && impact.contains("UserStore::login"), "{impact}");
    browser.screenshot(shots.as_deref(), "impact");

    // Sessions: two contexts in one session, the second citing what the first sent.
    browser.go(&format!("{ui}#ask"));
    browser.js("document.getElementById('ask-kind').value = 'context';");
    browser.type_into("#ask-session", "ui-demo");
    browser.type_into("#ask-budget", "400");
    for q in ["how are passwords hashed and verified", "password hashing and login"] {
        browser.type_into("#ask-text", q);
        browser.click("#ask-go");
        browser.wait("the context", &format!("document.getElementById('ask-summary').textContent.includes('tokens') && document.getElementById('ask-curl').textContent.includes({q:?})"));
    }
    browser.go(&format!("{ui}#sessions"));
    browser.wait("the session's answers", "document.querySelectorAll('#sessions-list .answer').length === 2");
    let sessions = browser.text("#sessions-list");
    assert!(sessions.contains("ui-demo") && sessions.contains("password hashing and login"), "{sessions}");
    browser.screenshot(shots.as_deref(), "sessions");

    // An edit makes a new version; the status page follows it on its own.
    browser.go(&format!("{ui}#status"));
    browser.wait("the status page", "document.getElementById('stamp').textContent.startsWith('version')");
    let mut util = std::fs::read_to_string(root.join("lib/util.js")).unwrap();
    util.push_str("\nexport function clamp(x, lo, hi) {\n  return Math.min(hi, Math.max(lo, x));\n}\n");
    std::fs::write(root.join("lib/util.js"), util).unwrap();
    browser.wait(
        "a newer version",
        &format!("Number(document.getElementById('stamp').textContent.replace('version ', '')) > {version}"),
    );

    let errors = browser.console_errors();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
}
