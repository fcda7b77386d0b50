//! A very small `sh`: words with quotes and `$VAR`, lists joined by `;`,
//! `&&` and `||`, pipelines with `|`, and `>` / `>>` redirects into the
//! container's filesystem. Enough for `sh -c "exit 3"`, `sh -c "echo $HOME"`
//! and kubectl cp's `tar cf - x | tail -c+N`.

use std::collections::BTreeMap;

/// A token of a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// A word after quote removal and expansion.
    Word(String),
    /// `;`, `&&`, `||`, `|`, `>`, `>>` or a newline (as `;`).
    Op(&'static str),
}

/// A syntax error, worded like dash's.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("sh: syntax error: {0}")]
pub struct SyntaxError(pub String);

/// Split `line` into tokens, expanding `$NAME`, `${NAME}` and `$?` from
/// `vars` outside single quotes.
pub fn tokenize(line: &str, vars: &BTreeMap<String, String>) -> Result<Vec<Token>, SyntaxError> {
    let mut tokens = Vec::new();
    let mut chars = line.chars().peekable();
    let mut word = String::new();
    let mut in_word = false;
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => flush(&mut tokens, &mut word, &mut in_word),
            '\n' | ';' => {
                flush(&mut tokens, &mut word, &mut in_word);
                tokens.push(Token::Op(";"));
            }
            '>' if chars.peek() == Some(&'&') || (in_word && (word == "1" || word == "2")) => {
                // `>&2`, `1>&2`, `2>&1`, `2>file`: file-descriptor redirects.
                let fd = if in_word && (word == "1" || word == "2") {
                    std::mem::take(&mut word)
                } else {
                    "1".into()
                };
                in_word = false;
                flush(&mut tokens, &mut word, &mut in_word);
                let dup = chars.peek() == Some(&'&');
                if dup {
                    chars.next();
                }
                let target = if dup { chars.next() } else { None };
                tokens.push(Token::Op(match (fd.as_str(), target) {
                    ("1", Some('2')) => ">&2",
                    ("2", Some('1')) => "2>&1",
                    ("1", Some('1')) | ("2", Some('2')) => "",
                    ("2", None) => "2>",
                    ("1", None) => ">",
                    _ => return Err(SyntaxError("bad fd number".into())),
                }));
            }
            '&' | '|' | '>' => {
                flush(&mut tokens, &mut word, &mut in_word);
                let doubled = chars.peek() == Some(&c);
                if doubled {
                    chars.next();
                }
                tokens.push(Token::Op(match (c, doubled) {
                    ('&', true) => "&&",
                    ('|', true) => "||",
                    ('|', false) => "|",
                    ('>', true) => ">>",
                    ('>', false) => ">",
                    _ => return Err(SyntaxError("\"&\" unexpected".into())),
                }));
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => word.push(ch),
                        None => return Err(SyntaxError("Unterminated quoted string".into())),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(ch @ ('"' | '\\' | '$')) => word.push(ch),
                            Some(ch) => {
                                word.push('\\');
                                word.push(ch);
                            }
                            None => return Err(SyntaxError("Unterminated quoted string".into())),
                        },
                        Some('$') => expand(&mut chars, vars, &mut word),
                        Some(ch) => word.push(ch),
                        None => return Err(SyntaxError("Unterminated quoted string".into())),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(ch) = chars.next() {
                    word.push(ch);
                }
            }
            '$' => {
                in_word = true;
                expand(&mut chars, vars, &mut word);
            }
            '#' if !in_word => break,
            ch => {
                in_word = true;
                word.push(ch);
            }
        }
    }
    flush(&mut tokens, &mut word, &mut in_word);
    Ok(tokens)
}

fn flush(tokens: &mut Vec<Token>, word: &mut String, in_word: &mut bool) {
    if *in_word {
        tokens.push(Token::Word(std::mem::take(word)));
        *in_word = false;
    }
}

fn expand(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, vars: &BTreeMap<String, String>, word: &mut String) {
    let mut name = String::new();
    match chars.peek() {
        Some('{') => {
            chars.next();
            for ch in chars.by_ref() {
                if ch == '}' {
                    break;
                }
                name.push(ch);
            }
        }
        Some('?') => {
            chars.next();
            name.push('?');
        }
        _ => {
            while let Some(&ch) = chars.peek() {
                if !(ch.is_ascii_alphanumeric() || ch == '_') {
                    break;
                }
                name.push(ch);
                chars.next();
            }
            if name.is_empty() {
                word.push('$');
                return;
            }
        }
    }
    if let Some(value) = vars.get(&name) {
        word.push_str(value);
    }
}

/// One command of a pipeline: its words and an optional output redirect.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Simple {
    /// argv.
    pub argv: Vec<String>,
    /// `> file` (false) or `>> file` (true).
    pub redirect: Option<(String, bool)>,
    /// `2> file`.
    pub stderr_file: Option<String>,
    /// `>&2` (stdout to stderr) or `2>&1` (stderr to stdout).
    pub dup: Option<&'static str>,
}

/// A pipeline and the operator that joins it to the next one (`;`, `&&`,
/// `||`; `;` for the last).
pub type Step = (Vec<Simple>, &'static str);

/// Parse tokens into a list of pipelines.
pub fn parse(tokens: Vec<Token>) -> Result<Vec<Step>, SyntaxError> {
    let mut steps = Vec::new();
    let mut pipeline = vec![Simple::default()];
    let mut tokens = tokens.into_iter().peekable();
    while let Some(token) = tokens.next() {
        let Some(current) = pipeline.last_mut() else { break };
        match token {
            Token::Word(w) => current.argv.push(w),
            Token::Op(op @ (">" | ">>" | "2>")) => match tokens.next() {
                Some(Token::Word(file)) if op == "2>" => current.stderr_file = Some(file),
                Some(Token::Word(file)) => current.redirect = Some((file, op == ">>")),
                _ => return Err(SyntaxError("redirection unexpected".into())),
            },
            Token::Op(op @ (">&2" | "2>&1")) => current.dup = Some(op),
            Token::Op("") => {}
            Token::Op("|") => {
                if current.argv.is_empty() {
                    return Err(SyntaxError("\"|\" unexpected".into()));
                }
                pipeline.push(Simple::default());
            }
            Token::Op(op) => {
                let empty = current.argv.is_empty();
                if empty && pipeline.len() == 1 && op == ";" {
                    continue;
                }
                if empty {
                    return Err(SyntaxError(format!("\"{op}\" unexpected")));
                }
                steps.push((std::mem::replace(&mut pipeline, vec![Simple::default()]), op));
            }
        }
    }
    if pipeline.iter().any(|s| !s.argv.is_empty()) {
        steps.push((pipeline, ";"));
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        let vars = BTreeMap::from([
            ("HOME".to_string(), "/root".to_string()),
            ("?".to_string(), "3".to_string()),
        ]);
        tokenize(line, &vars)
            .unwrap()
            .into_iter()
            .filter_map(|t| match t {
                Token::Word(w) => Some(w),
                Token::Op(_) => None,
            })
            .collect()
    }

    #[test]
    fn quotes_escapes_and_variables_expand_like_sh() {
        assert_eq!(
            words(r#"echo 'a  b' "c $HOME" d\ e ${HOME}x $? $NOPE"#),
            ["echo", "a  b", "c /root", "d e", "/rootx", "3", ""]
        );
        assert_eq!(words("echo '$HOME' # comment"), ["echo", "$HOME"]);
        assert!(tokenize("echo 'open", &BTreeMap::new()).is_err());
    }

    #[test]
    fn lists_pipelines_and_redirects_parse_into_steps() {
        let steps = parse(
            tokenize(
                "false || echo x > /tmp/f; tar cf - /a | tail -c+5 && exit 3",
                &BTreeMap::new(),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(steps.len(), 4);
        assert_eq!(steps[0].1, "||");
        assert_eq!(steps[1].0[0].redirect, Some(("/tmp/f".to_string(), false)));
        assert_eq!(steps[1].1, ";");
        assert_eq!((steps[2].0.len(), steps[2].1), (2, "&&"));
        assert_eq!(steps[3].0[0].argv, ["exit", "3"]);
        assert!(parse(tokenize("| x", &BTreeMap::new()).unwrap()).is_err());
        let dup = parse(tokenize("echo oops >&2; ls 2>/dev/null 2>&1", &BTreeMap::new()).unwrap()).unwrap();
        assert_eq!(dup[0].0[0].dup, Some(">&2"));
        assert_eq!(dup[0].0[0].argv, ["echo", "oops"]);
        assert_eq!(
            (dup[1].0[0].stderr_file.as_deref(), dup[1].0[0].dup),
            (Some("/dev/null"), Some("2>&1"))
        );
    }
}
