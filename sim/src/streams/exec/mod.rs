//! pods/exec and pods/attach: options, the simulated processes, and the
//! Status written on the error channel when they end.

pub mod commands;
pub mod files;
pub mod fs;
pub mod io;
pub mod shell;
pub mod spdy;
pub mod tar;
pub mod tar_cmd;
pub mod ws;

use crate::status::Status;
use bytes::Bytes;
use io::Stdio;
use serde_json::json;
use std::time::Duration;

/// `PodExecOptions` / `PodAttachOptions` from the query string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOptions {
    /// `command` (repeated); empty for attach.
    pub command: Vec<String>,
    /// `container`.
    pub container: String,
    /// `stdin`.
    pub stdin: bool,
    /// `stdout`.
    pub stdout: bool,
    /// `stderr` (forced off with a TTY, as the kubelet does).
    pub stderr: bool,
    /// `tty`.
    pub tty: bool,
    /// attach rather than exec.
    pub attach: bool,
}

/// Go's `strconv.ParseBool`, which the parameter codec uses.
fn parse_bool(name: &str, value: &str) -> Result<bool, Status> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(Status::bad_request(format!(
            "{name}: strconv.ParseBool: parsing \"{value}\": invalid syntax"
        ))),
    }
}

impl ExecOptions {
    /// Parse the query of an exec (`attach` false) or attach request.
    pub fn from_query(query: Option<&str>, attach: bool) -> Result<Self, Status> {
        let mut opts = ExecOptions {
            attach,
            ..Default::default()
        };
        for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match &*key {
                "command" if !attach => opts.command.push(value.into_owned()),
                "container" => opts.container = value.into_owned(),
                "stdin" => opts.stdin = parse_bool("stdin", &value)?,
                "stdout" => opts.stdout = parse_bool("stdout", &value)?,
                "stderr" => opts.stderr = parse_bool("stderr", &value)?,
                "tty" => opts.tty = parse_bool("tty", &value)?,
                _ => {}
            }
        }
        if opts.tty {
            opts.stderr = false;
        }
        if !(opts.stdin || opts.stdout || opts.stderr) {
            return Err(Status::bad_request(
                "you must specify at least 1 of stdin, stdout, stderr",
            ));
        }
        Ok(opts)
    }
}

/// Who reports a non-zero exit: the kubelet (SPDY, proxied) or
/// kube-apiserver's WebSocket-to-SPDY translator, which words it
/// differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reporter {
    /// The kubelet's own message.
    Kubelet,
    /// The API server's stream translator.
    Translator,
}

/// The JSON `metav1.Status` for the error channel (protocol v4 and v5).
pub fn exit_status(code: i32, argv: &[String], reporter: Reporter) -> Bytes {
    if code == 0 {
        return Bytes::from_static(br#"{"metadata":{},"status":"Success"}"#);
    }
    let detail = match reporter {
        Reporter::Kubelet => format!("error executing command [{}], exit code {code}", argv.join(" ")),
        Reporter::Translator => format!("command terminated with exit code {code}"),
    };
    let status = json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("command terminated with non-zero exit code: {detail}"),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    });
    Bytes::from(status.to_string())
}

/// The plain-text error of protocols v1 to v3 (nothing on success).
pub fn exit_text(code: i32, argv: &[String]) -> Bytes {
    if code == 0 {
        return Bytes::new();
    }
    Bytes::from(format!(
        "command terminated with non-zero exit code: error executing command [{}], exit code {code}",
        argv.join(" ")
    ))
}

/// Run what the request asked for: the command (exec), or the container's
/// main process (attach: it echoes stdin until stdin ends, or prints its
/// log lines while attached without stdin).
pub async fn run_process(container: &commands::Container, opts: &ExecOptions, io: Stdio) -> i32 {
    if !opts.attach {
        return commands::exec(container, opts.command.clone(), io).await;
    }
    if opts.stdin {
        return commands::exec(container, vec!["cat".into()], io).await;
    }
    let mut n = 0u64;
    loop {
        n += 1;
        let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ");
        io.out(format!(
            "{now} {} {} attached request #{n} GET /healthz 200\n",
            container.pod, container.container
        ));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_options_parse_like_the_parameter_codec() {
        let o = ExecOptions::from_query(
            Some("command=sh&command=-c&command=exit%203&container=web&stdout=true&stderr=1"),
            false,
        )
        .unwrap();
        assert_eq!(o.command, ["sh", "-c", "exit 3"]);
        assert_eq!(
            (o.container.as_str(), o.stdin, o.stdout, o.stderr, o.tty),
            ("web", false, true, true, false)
        );
        let tty =
            ExecOptions::from_query(Some("command=sh&stdin=true&stdout=true&stderr=true&tty=true"), false).unwrap();
        assert!(!tty.stderr, "a TTY merges stderr into stdout");
        assert_eq!(
            ExecOptions::from_query(Some("command=ls"), false).unwrap_err().code,
            400
        );
        assert_eq!(
            ExecOptions::from_query(Some("stdout=yes"), false).unwrap_err().code,
            400
        );
    }

    #[test]
    fn non_zero_exits_carry_the_exit_code_cause() {
        let argv = vec!["sh".to_string(), "-c".to_string(), "exit 3".to_string()];
        let v: serde_json::Value = serde_json::from_slice(&exit_status(3, &argv, Reporter::Kubelet)).unwrap();
        assert_eq!(v["reason"], "NonZeroExitCode");
        assert_eq!(v["details"]["causes"][0], json!({"reason": "ExitCode", "message": "3"}));
        assert_eq!(
            v["message"],
            "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3"
        );
        assert_eq!(
            &exit_status(0, &argv, Reporter::Translator)[..],
            br#"{"metadata":{},"status":"Success"}"#
        );
        assert!(exit_text(0, &argv).is_empty());
    }
}
