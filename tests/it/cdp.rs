//! A minimal Chrome DevTools Protocol client over the WebSocket that
//! headless Chromium opens: enough to open a page, run a script in it and
//! read the result. (The crate's own tokio-tungstenite: no browser-driving
//! dependency needed.)

use crate::support::eventually;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// Debian's Chromium (`scripts/setup` installs it).
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// A headless Chromium, killed when dropped.
pub struct Browser {
    child: Child,
    ws: WebSocketStream<TcpStream>,
    next_id: u64,
    session: String,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Start Chromium with a fresh profile in `profile`, trusting only the
    /// serving key whose SPKI SHA-256 (base64) is `spki`, and open a tab.
    pub async fn start(profile: &Path, spki: &str) -> Browser {
        let child = Command::new(CHROMIUM)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(format!("--ignore-certificate-errors-spki-list={spki}"))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium starts (scripts/setup installs it)");
        let port_file = profile.join("DevToolsActivePort");
        let text = eventually("Chromium to write its DevTools port", async || {
            let text = std::fs::read_to_string(&port_file).unwrap_or_default();
            (text.lines().count() >= 2).then_some(text)
        })
        .await;
        let mut lines = text.lines();
        let (port, path) = (
            lines.next().expect("devtools port"),
            lines.next().expect("devtools path"),
        );
        let tcp = TcpStream::connect(format!("127.0.0.1:{port}")).await.unwrap();
        let (ws, _) = tokio_tungstenite::client_async(format!("ws://127.0.0.1:{port}{path}"), tcp)
            .await
            .unwrap();
        let mut browser = Browser {
            child,
            ws,
            next_id: 0,
            session: String::new(),
        };
        let target = browser
            .call(false, "Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let target_id = target["targetId"].as_str().unwrap().to_string();
        let attached = browser
            .call(
                false,
                "Target.attachToTarget",
                json!({"targetId": target_id, "flatten": true}),
            )
            .await;
        browser.session = attached["sessionId"].as_str().unwrap().to_string();
        browser
    }

    /// Send `method` (to the tab when `in_tab`) and wait for its result.
    async fn call(&mut self, in_tab: bool, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if in_tab {
            message["sessionId"] = json!(self.session);
        }
        self.ws.send(Message::text(message.to_string())).await.unwrap();
        loop {
            let Some(Ok(Message::Text(text))) = self.ws.next().await else {
                continue;
            };
            let reply: Value = serde_json::from_str(&text).unwrap();
            if reply["id"] == id {
                assert!(reply.get("error").is_none(), "{method}: {reply}");
                return reply["result"].clone();
            }
        }
    }

    /// Open `url` in the tab.
    pub async fn open(&mut self, url: &str) {
        self.call(true, "Page.navigate", json!({"url": url})).await;
    }

    /// Evaluate `script` in the page; its value.
    pub async fn eval(&mut self, script: &str) -> Value {
        let result = self
            .call(
                true,
                "Runtime.evaluate",
                json!({"expression": script, "returnByValue": true}),
            )
            .await;
        result["result"]["value"].clone()
    }

    /// Wait until `script` evaluates to true in a loaded page.
    pub async fn wait_for(&mut self, script: &str) {
        // The page as it is, when it is not yet what was awaited.
        let check =
            format!("(document.readyState === 'complete' && !!({script})) || document.documentElement.outerHTML");
        eventually(&format!("the page to satisfy {script}"), async || {
            match self.eval(&check).await {
                Value::Bool(true) => Ok(()),
                page => Err(page),
            }
        })
        .await;
    }
}
