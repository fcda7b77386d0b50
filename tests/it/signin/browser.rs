//! A person signs in on the web in headless Chromium, driven over
//! WebDriver (Debian's chromium-driver, the fantoccini client): portcullis
//! sends the browser to the provider, the person signs in there, and comes
//! back signed in to portcullis; signing out ends it.

use super::{free_port, portcullis, Idp};
use crate::support::eventually;
use fantoccini::{Client, ClientBuilder, Locator};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// chromedriver on a free loopback port, and a Chromium session in it
/// with a fresh profile.
pub struct Chromium {
    driver: Child,
    /// The WebDriver session.
    pub client: Client,
    _folder: tempfile::TempDir,
}

/// The colour schemes the pages follow: a name, the Chromium flags that
/// choose it, and the body's background in it.
pub const SCHEMES: &[(&str, &[&str], &str)] = &[
    (
        "light",
        &["--blink-settings=preferredColorScheme=1"],
        "rgb(255, 255, 255)",
    ),
    (
        "dark",
        &["--blink-settings=preferredColorScheme=0", "--force-dark-mode"],
        "rgb(21, 23, 26)",
    ),
];

impl Chromium {
    /// Start chromedriver and a headless Chromium (no network beyond this
    /// machine, no first-run, no sync), trusting any certificate (the test
    /// portcullis's own CA is not the system's).
    pub async fn start() -> Chromium {
        Self::start_with(&[]).await
    }

    /// [`Self::start`], with more Chromium flags (e.g. a colour scheme).
    pub async fn start_with(extra: &[&str]) -> Chromium {
        Self::start_with_prefs(extra, serde_json::json!({})).await
    }

    /// [`Self::start`], saving downloads in `dir` without asking.
    pub async fn start_downloading_to(dir: &std::path::Path) -> Chromium {
        let prefs = serde_json::json!({
            "download.default_directory": dir,
            "download.prompt_for_download": false,
        });
        Self::start_with_prefs(&[], prefs).await
    }

    async fn start_with_prefs(extra: &[&str], prefs: serde_json::Value) -> Chromium {
        let port = free_port();
        // The profile, and the temporary files Chromium leaves when it is
        // killed rather than closed (its `org.chromium.Chromium.scoped_dir`
        // folders), both in a folder removed with this value.
        let folder = tempfile::tempdir().unwrap();
        let (profile, scratch) = (folder.path().join("profile"), folder.path().join("tmp"));
        std::fs::create_dir(&scratch).unwrap();
        // A process group of its own, which the Chromium it starts joins:
        // dropped, the whole group is killed, as killing chromedriver alone
        // leaves its Chromium running.
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .process_group(0)
            .env("TMPDIR", &scratch)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (scripts/setup installs chromium-driver)");
        let mut args = vec![
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ];
        let profile_arg = format!("--user-data-dir={}", profile.display());
        args.push(&profile_arg);
        args.extend_from_slice(extra);
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("acceptInsecureCerts".into(), true.into());
        capabilities.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({"binary": "/usr/bin/chromium", "args": args, "prefs": prefs}),
        );
        let url = format!("http://127.0.0.1:{port}");
        let client = eventually("chromedriver to take a session", async || {
            ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
                .map_err(|e| e.to_string())
        })
        .await;
        Chromium {
            driver,
            client,
            _folder: folder,
        }
    }

    /// Click the element whose id is `id`.
    pub async fn click(&self, id: &str) {
        self.client.find(Locator::Id(id)).await.unwrap().click().await.unwrap();
    }

    /// The page's text.
    pub async fn text(&self) -> String {
        let body = self.client.find(Locator::Css("body")).await;
        match body {
            Ok(body) => body.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Wait until the page's text contains `words`.
    pub async fn wait_for_text(&self, words: &str) {
        eventually(&format!("the page to say {words:?}"), async || {
            let text = self.text().await;
            if text.contains(words) {
                Ok(())
            } else {
                Err(text)
            }
        })
        .await;
    }

    /// Wait until `script` (an expression) is true in the page.
    pub async fn wait_until(&self, script: &str) {
        let check = format!("return document.readyState === 'complete' && !!({script})");
        eventually(&format!("the page to satisfy {script}"), async || {
            match self.client.execute(&check, vec![]).await {
                Ok(serde_json::Value::Bool(true)) => Ok(()),
                _ => Err(self.text().await),
            }
        })
        .await;
    }

    /// The number `script` returns.
    pub async fn number(&self, script: &str) -> i64 {
        self.client.execute(script, vec![]).await.unwrap().as_i64().unwrap()
    }

    /// How wide the page is beyond a `width` px viewport (0 when it fits),
    /// after checking the viewport is that narrow.
    pub async fn overflow(&self, width: i64) -> i64 {
        let viewport = self.number("return document.documentElement.clientWidth").await;
        assert!(viewport <= width, "the viewport is {width} px or less ({viewport})");
        let scroll = self.number("return document.scrollingElement.scrollWidth").await;
        (scroll - viewport).max(0)
    }

    /// The body's computed background colour.
    pub async fn background(&self) -> String {
        let found = self
            .client
            .execute("return getComputedStyle(document.body).backgroundColor", vec![])
            .await
            .unwrap();
        found.as_str().unwrap().to_string()
    }

    /// The current page fits a 390 px phone without sideways scrolling and
    /// axe-core finds no serious or critical violation on it: issue 18 asks
    /// it of every page portcullis serves.
    pub async fn assert_fits_a_phone_and_passes_axe(&self, page: &str) {
        self.client.set_window_size(390, 844).await.unwrap();
        let overflow = self.overflow(390).await;
        assert_eq!(overflow, 0, "{page}: {overflow} px wider than a phone");
        let violations = self.axe_violations().await;
        assert!(violations.is_empty(), "{page}: {violations:#?}");
    }

    /// axe-core's serious and critical violations on the current page.
    pub async fn axe_violations(&self) -> Vec<String> {
        let axe = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/node_modules/axe-core/axe.min.js"
        ))
        .expect("scripts/setup installs axe-core into tests/node_modules");
        self.client.execute(&axe, vec![]).await.unwrap();
        let found = self
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1];\
                 axe.run(document).then(r => done(r.violations\
                   .filter(v => v.impact === 'serious' || v.impact === 'critical')\
                   .map(v => v.id + ': ' + v.nodes.map(n => n.html).join(' | '))));",
                vec![],
            )
            .await
            .unwrap();
        serde_json::from_value(found).unwrap()
    }

    /// End the session (and, dropped, chromedriver).
    pub async fn stop(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Chromium {
    // Also when a test fails half-way: no chromedriver outlives its test.
    fn drop(&mut self) {
        let group = rustix::process::Pid::from_child(&self.driver);
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// The processes whose command line names `folder`: Chromium's, for the
/// profile in it.
fn processes_naming(folder: &std::path::Path) -> Vec<String> {
    let needle = folder.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
        .map(|cmdline| String::from_utf8_lossy(&cmdline).replace('\0', " "))
        .filter(|cmdline| cmdline.contains(&needle))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_dropped_without_stop_as_a_failing_test_drops_it_leaves_no_chromium_running() {
    let browser = Chromium::start().await;
    let folder = browser._folder.path().to_path_buf();
    assert!(
        !processes_naming(&folder).is_empty(),
        "Chromium runs with its profile in {folder:?}"
    );
    drop(browser);
    eventually("no Chromium left with the dropped browser's profile", async || {
        let left = processes_naming(&folder);
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{left:?}"))
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_on_the_web_through_the_provider_in_chromium_and_signs_out() {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, |_| {}).await;
    let browser = Chromium::start().await;
    browser
        .client
        .goto(&format!("https://127.0.0.1:{port}/approvals"))
        .await
        .unwrap();
    // The provider's own sign-in page.
    let login = browser.client.wait().for_element(Locator::Id("login")).await.unwrap();
    assert!(browser
        .client
        .current_url()
        .await
        .unwrap()
        .as_str()
        .starts_with(&idp.issuer));
    login.send_keys("ana").await.unwrap();
    browser
        .client
        .find(Locator::Id("signin"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser.wait_for_text("Signed in as ana").await;
    assert!(browser.text().await.contains("Nothing waits on you"));
    let url = browser.client.current_url().await.unwrap();
    assert_eq!((url.port(), url.path()), (Some(port), "/approvals"));
    let cookies = browser.client.execute("return document.cookie", vec![]).await.unwrap();
    assert_eq!(cookies, "", "the session cookie is HttpOnly");

    browser
        .client
        .find(Locator::Css("form[action='/logout'] button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser.wait_for_text("You are signed out").await;
    browser.assert_fits_a_phone_and_passes_axe("the signed-out page").await;
    assert_eq!(env.store.web_session_count("ana").unwrap(), 0);
    browser.stop().await;
    env.stop().await;
}

/// A page of another site (`localhost`, not portcullis's `127.0.0.1`) on a
/// free port, serving `html` at `/`, until the runtime ends.
async fn other_site(html: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://localhost:{}/", listener.local_addr().unwrap().port());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let html = html.clone();
            tokio::spawn(async move {
                let mut head = vec![0; 16 * 1024];
                let _ = stream.read(&mut head).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{html}",
                    html.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    url
}

/// Sign `login` in at the provider, starting from portcullis's `/approvals`.
async fn sign_in(browser: &Chromium, port: u16, login: &str) {
    browser
        .client
        .goto(&format!("https://127.0.0.1:{port}/approvals"))
        .await
        .unwrap();
    let field = browser.client.wait().for_element(Locator::Id("login")).await.unwrap();
    field.send_keys(login).await.unwrap();
    browser.click("signin").await;
    browser.wait_for_text(&format!("Signed in as {login}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_from_another_site_opens_signed_in_and_that_sites_post_carries_no_session() {
    let port = free_port();
    let idp = Idp::start(port);
    let env = portcullis(&idp.issuer, port, |_| {}).await;
    let browser = Chromium::start().await;
    sign_in(&browser, port, "ana").await;
    assert_eq!(env.store.web_session_count("ana").unwrap(), 1);

    // As a link in a chat's web page: a top-level navigation from another
    // site. With the session cookie left out, portcullis would send the
    // browser to the provider and make a second session.
    let link = other_site(format!(
        "<a id=\"go\" href=\"https://127.0.0.1:{port}/approvals\">the approvals</a>\
         <form id=\"out\" method=\"post\" action=\"https://127.0.0.1:{port}/logout\">\
         <button id=\"post\">sign out</button></form>"
    ))
    .await;
    browser.client.goto(&link).await.unwrap();
    browser.click("go").await;
    browser.wait_for_text("Signed in as ana").await;
    let url = browser.client.current_url().await.unwrap();
    assert_eq!((url.port(), url.path()), (Some(port), "/approvals"));
    assert_eq!(
        env.store.web_session_count("ana").unwrap(),
        1,
        "the same session, not a new one"
    );

    // The other site's form posts without the cookie: nothing is signed out.
    browser.client.goto(&link).await.unwrap();
    browser.click("post").await;
    browser.wait_for_text("Sign in first").await;
    assert_eq!(env.store.web_session_count("ana").unwrap(), 1, "still signed in");
    browser
        .client
        .goto(&format!("https://127.0.0.1:{port}/approvals"))
        .await
        .unwrap();
    browser.wait_for_text("Signed in as ana").await;
    browser.stop().await;
    env.stop().await;
}
