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
    let mut lexer = Lexer {
        chars: line.chars().peekable(),
        vars,
        tokens: Vec::new(),
        word: String::new(),
        in_word: false,
    };
    while let Some(c) = lexer.chars.next() {
        match c {
            ' ' | '\t' => lexer.flush(),
            '\n' | ';' => {
                lexer.flush();
                lexer.tokens.push(Token::Op(";"));
            }
            '>' if lexer.at_fd_redirect() => lexer.fd_redirect()?,
            '&' | '|' | '>' => lexer.operator(c)?,
            '\'' => lexer.single_quoted()?,
            '"' => lexer.double_quoted()?,
            '\\' => {
                lexer.in_word = true;
                if let Some(ch) = lexer.chars.next() {
                    lexer.word.push(ch);
                }
            }
            '$' => {
                lexer.in_word = true;
                lexer.expand();
            }
            '#' if !lexer.in_word => break,
            ch => {
                lexer.in_word = true;
                lexer.word.push(ch);
            }
        }
    }
    lexer.flush();
    Ok(lexer.tokens)
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

/// The tokenizer's state: the rest of the line, the tokens so far and the
/// word being built (a quoted empty string is still a word, hence `in_word`).
struct Lexer<'a> {
    chars: Chars<'a>,
    vars: &'a BTreeMap<String, String>,
    tokens: Vec<Token>,
    word: String,
    in_word: bool,
}

impl Lexer<'_> {
    fn flush(&mut self) {
        if self.in_word {
            self.tokens.push(Token::Word(std::mem::take(&mut self.word)));
            self.in_word = false;
        }
    }

    /// `>&`, or `>` right after a lone `1` or `2`: a file-descriptor redirect.
    fn at_fd_redirect(&mut self) -> bool {
        self.chars.peek() == Some(&'&') || (self.in_word && (self.word == "1" || self.word == "2"))
    }

    /// `>&2`, `1>&2`, `2>&1`, `2>file`: file-descriptor redirects.
    fn fd_redirect(&mut self) -> Result<(), SyntaxError> {
        let fd = if self.in_word && (self.word == "1" || self.word == "2") {
            std::mem::take(&mut self.word)
        } else {
            "1".into()
        };
        self.in_word = false;
        self.flush();
        let dup = self.chars.peek() == Some(&'&');
        if dup {
            self.chars.next();
        }
        let target = if dup { self.chars.next() } else { None };
        self.tokens.push(Token::Op(match (fd.as_str(), target) {
            ("1", Some('2')) => ">&2",
            ("2", Some('1')) => "2>&1",
            ("1", Some('1')) | ("2", Some('2')) => "",
            ("2", None) => "2>",
            ("1", None) => ">",
            _ => return Err(SyntaxError("bad fd number".into())),
        }));
        Ok(())
    }

    /// `&&`, `|`, `||`, `>` or `>>`; a lone `&` (background) is not supported.
    fn operator(&mut self, c: char) -> Result<(), SyntaxError> {
        self.flush();
        let doubled = self.chars.peek() == Some(&c);
        if doubled {
            self.chars.next();
        }
        self.tokens.push(Token::Op(match (c, doubled) {
            ('&', true) => "&&",
            ('|', true) => "||",
            ('|', false) => "|",
            ('>', true) => ">>",
            ('>', false) => ">",
            _ => return Err(SyntaxError("\"&\" unexpected".into())),
        }));
        Ok(())
    }

    /// `'...'`: everything literal up to the closing quote.
    fn single_quoted(&mut self) -> Result<(), SyntaxError> {
        self.in_word = true;
        loop {
            match self.chars.next() {
                Some('\'') => return Ok(()),
                Some(ch) => self.word.push(ch),
                None => return Err(SyntaxError("Unterminated quoted string".into())),
            }
        }
    }

    /// `"..."`: `$` expands, and `\` escapes only `"`, `\` and `$`.
    fn double_quoted(&mut self) -> Result<(), SyntaxError> {
        self.in_word = true;
        loop {
            match self.chars.next() {
                Some('"') => return Ok(()),
                Some('\\') => match self.chars.next() {
                    Some(ch @ ('"' | '\\' | '$')) => self.word.push(ch),
                    Some(ch) => {
                        self.word.push('\\');
                        self.word.push(ch);
                    }
                    None => return Err(SyntaxError("Unterminated quoted string".into())),
                },
                Some('$') => self.expand(),
                Some(ch) => self.word.push(ch),
                None => return Err(SyntaxError("Unterminated quoted string".into())),
            }
        }
    }

    /// `$NAME`, `${NAME}` or `$?`: the variable's value (nothing if unset);
    /// a `$` before anything else stays a `$`.
    fn expand(&mut self) {
        let mut name = String::new();
        match self.chars.peek() {
            Some('{') => {
                self.chars.next();
                for ch in self.chars.by_ref() {
                    if ch == '}' {
                        break;
                    }
                    name.push(ch);
                }
            }
            Some('?') => {
                self.chars.next();
                name.push('?');
            }
            _ => {
                while let Some(&ch) = self.chars.peek() {
                    if !(ch.is_ascii_alphanumeric() || ch == '_') {
                        break;
                    }
                    name.push(ch);
                    self.chars.next();
                }
                if name.is_empty() {
                    self.word.push('$');
                    return;
                }
            }
        }
        if let Some(value) = self.vars.get(&name) {
            self.word.push_str(value);
        }
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
