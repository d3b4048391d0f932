//! `Problem`: a load-time failure with its file and place (plugins, workflows, config).
//!
//! Loaders build problems with the paths they read; whoever collects them for people and
//! models ([`Problem::relative_to`]: the engine's build, `plugin check`, the reasons of
//! unavailable tools and workflows) names files relative to the home, so no absolute path
//! reaches a model and every problem uses one path style.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Something wrong in a file the engine loads, reported with where it is and how to fix it.
/// Loading goes on past a problem: one broken plugin or workflow never stops the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The file at fault.
    pub file: PathBuf,
    /// 1-based line, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// 1-based column, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when there is something useful to say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Problem {
    /// A problem with a file and message only.
    pub fn new(file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Problem {
            file: file.into(),
            line: None,
            column: None,
            message: message.into(),
            hint: None,
        }
    }

    /// Adds a line (and column) to the problem.
    pub fn at(mut self, line: u32, column: Option<u32>) -> Self {
        self.line = Some(line);
        self.column = column;
        self
    }

    /// The problem with its file, and any path inside the home its message or hint
    /// mentions, relative to `home` (`plugins/Dice/plugin.yaml`). Paths outside the home
    /// stay as they are.
    pub fn relative_to(mut self, home: &Path) -> Self {
        let bases = home_forms(home);
        for base in &bases {
            if let Ok(rel) = self.file.strip_prefix(base) {
                if !rel.as_os_str().is_empty() {
                    self.file = rel.to_path_buf();
                }
                break;
            }
        }
        self.message = strip_home(&self.message, &bases);
        self.hint = self.hint.map(|h| strip_home(&h, &bases));
        self
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// The comment syntax of a text [`unclosed_bracket`] scans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    /// `# …` comments, `'…'`/`"…"` strings.
    Yaml,
    /// `// …` and `/* … */` comments, `"…"`, `'…'` and `` `…` `` strings.
    Rhai,
}

/// `the '[' opened at line 3, column 10 is never closed` for the innermost bracket of
/// `text` left open (or closed by the wrong bracket), so a parser error met far below it
/// says where the real fault is.
pub(crate) fn unclosed_bracket(text: &str, syntax: Syntax) -> Option<String> {
    let mut open: Vec<(char, u32, u32)> = Vec::new();
    // Rhai: the innermost open bracket is a map literal `#{` (by its index in `open`).
    let mut maps: Vec<usize> = Vec::new();
    let (mut line, mut col) = (1u32, 0u32);
    let mut chars = text.chars().peekable();
    let mut quote: Option<char> = None;
    let mut block_comment = false;
    let mut prev = '\n';
    while let Some(c) = chars.next() {
        col += 1;
        if c == '\n' {
            line += 1;
            col = 0;
            if syntax == Syntax::Yaml {
                quote = None;
            }
        }
        if block_comment {
            if c == '*' && chars.peek() == Some(&'/') {
                chars.next();
                col += 1;
                block_comment = false;
            }
            prev = c;
            continue;
        }
        if let Some(q) = quote {
            if c == '\\' && syntax == Syntax::Rhai {
                chars.next();
                col += 1;
            } else if c == q {
                quote = None;
            }
            prev = c;
            continue;
        }
        let comment = match syntax {
            Syntax::Yaml => c == '#' && prev.is_whitespace(),
            Syntax::Rhai => c == '/' && chars.peek() == Some(&'/'),
        };
        if comment {
            for n in chars.by_ref() {
                if n == '\n' {
                    line += 1;
                    col = 0;
                    break;
                }
            }
            prev = '\n';
            continue;
        }
        match c {
            '/' if syntax == Syntax::Rhai && chars.peek() == Some(&'*') => block_comment = true,
            '"' | '\'' => quote = Some(c),
            '`' if syntax == Syntax::Rhai => quote = Some(c),
            '{' if syntax == Syntax::Rhai && prev == '#' => {
                maps.push(open.len());
                open.push((c, line, col));
            }
            // A statement's `;` directly inside a map: the map was never closed.
            ';' if syntax == Syntax::Rhai && maps.last() == Some(&open.len().wrapping_sub(1)) => {
                let (_, l, cl) = open[open.len() - 1];
                return Some(format!(
                    "the '#{{' opened at line {l}, column {} is never closed (it meets ';' at line {line}, column {col})",
                    cl.saturating_sub(1)
                ));
            }
            '(' | '[' | '{' => open.push((c, line, col)),
            ')' | ']' | '}' => {
                let want = match c {
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                match open.last() {
                    Some((o, _, _)) if *o == want => {
                        open.pop();
                        if maps.last() == Some(&open.len()) {
                            maps.pop();
                        }
                    }
                    Some(&(o, l, cl)) => {
                        return Some(format!(
                            "the '{o}' opened at line {l}, column {cl} is closed by '{c}' at line {line}, column {col}"
                        ))
                    }
                    None => {}
                }
            }
            _ => {}
        }
        prev = c;
    }
    open.last()
        .map(|(o, l, c)| format!("the '{o}' opened at line {l}, column {c} is never closed"))
}

/// The spellings of `home` a path may start with: as given and canonical (the loaders
/// canonicalize some paths), `./` dropped.
/// `path` relative to `home` (`plugins/Dice`), written with `/`, when it lies inside the
/// home; `None` otherwise (or when it is the home itself).
pub fn inside_home(path: &Path, home: &Path) -> Option<String> {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    home_forms(home).iter().find_map(|b| {
        let b = b.canonicalize().unwrap_or_else(|_| b.clone());
        path.strip_prefix(&b)
            .ok()
            .filter(|r| !r.as_os_str().is_empty())
            .map(|r| r.to_string_lossy().replace('\\', "/"))
    })
}

/// How a message names the path `p`: `.` for the home itself, relative to the home inside
/// it (`plugins/Dice/data`), else as it is.
pub fn shown_path(p: &Path, home: &Path) -> String {
    if let Some(rel) = inside_home(p, home) {
        return rel;
    }
    let same = |a: &Path, b: &Path| a == b || a.canonicalize().ok() == b.canonicalize().ok();
    if p.is_absolute() && same(p, home) {
        return ".".into();
    }
    p.to_string_lossy().into_owned()
}

fn home_forms(home: &Path) -> Vec<PathBuf> {
    let mut out = vec![home.to_path_buf()];
    if let Ok(c) = home.canonicalize() {
        if c != home {
            out.push(c);
        }
    }
    if home == Path::new(".") || home.as_os_str().is_empty() {
        // `./plugins/x` and `plugins/x`: already relative.
        out.push(PathBuf::from("."));
    }
    out
}

/// `text` with every `<home>/` of an absolute home removed (so `declared in
/// /srv/home/plugins/A/plugin.yaml` reads `declared in plugins/A/plugin.yaml`).
fn strip_home(text: &str, bases: &[PathBuf]) -> String {
    let mut out = text.to_string();
    for b in bases.iter().filter(|b| b.is_absolute()) {
        let mut prefix = b.to_string_lossy().into_owned();
        if !prefix.ends_with(std::path::MAIN_SEPARATOR) {
            prefix.push(std::path::MAIN_SEPARATOR);
        }
        if out.contains(&prefix) {
            out = out.replace(&prefix, "");
        }
    }
    out
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        write!(f, ": {}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, " ({h})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unclosed_brackets_are_found_where_they_open() {
        let yaml = "name: A\npermissions:\n  hooks: [tool:before-invoke\nlimits: # [not this\n  wallMs: 5\n";
        assert_eq!(
            unclosed_bracket(yaml, Syntax::Yaml).as_deref(),
            Some("the '[' opened at line 3, column 10 is never closed")
        );
        let rhai = "fn f() {\n  let s = \"{\"; // (\n  let x = [1, 2;\n  x\n}\n";
        assert_eq!(
            unclosed_bracket(rhai, Syntax::Rhai).as_deref(),
            Some("the '[' opened at line 3, column 11 is closed by '}' at line 5, column 1")
        );
        assert_eq!(unclosed_bracket("a: [1, {b: 2}]\n", Syntax::Yaml), None);
        // Issue 36: an unclosed `#{` is blamed, not the function's `{`.
        let map = "fn f(a, ctx) {\n  let m = #{ a: 1, b: 2;\n  m\n}\n";
        assert_eq!(
            unclosed_bracket(map, Syntax::Rhai).as_deref(),
            Some("the '#{' opened at line 2, column 11 is never closed (it meets ';' at line 2, column 24)")
        );
        let fine = "fn f() {\n  let m = #{ a: #{ b: 1 } };\n  if true { m } else { #{} }\n}\n";
        assert_eq!(unclosed_bracket(fine, Syntax::Rhai), None);
    }
}
